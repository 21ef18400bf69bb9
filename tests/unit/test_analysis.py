"""The analyzer: what a memory and a query become, in English, in other languages, and in scripts without spaces."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from projections.search.analysis import SUMMARY_WEIGHT, Analyzer, languages, stopwords

english = Analyzer()


def test_words_are_stemmed_so_a_question_finds_the_other_form_of_its_word() -> None:
    assert set(english.terms("What did Caroline research?")) <= set(
        english.terms("Researching adoption agencies: it's been a dream for Caroline"))


def test_stopwords_go_and_contractions_with_them() -> None:
    assert english.terms("What did they do, and why didn't it work?") == ["work"]
    assert english.terms("the of and") == []


def test_a_possessive_stems_to_its_owner_whatever_its_apostrophe() -> None:
    assert english.terms("Caroline's") == english.terms("Caroline\u2019s") == english.terms("Caroline")


def test_snake_case_and_punctuation_split_words() -> None:
    assert english.terms("deployment_process for CI/CD v2.0") == ["deploy", "process", "ci", "cd", "v2", "0"]


def test_compatibility_forms_are_their_plain_letters() -> None:
    assert english.terms("\uff21\uff30\uff29 \ufb01les") == english.terms("API files")


def test_none_keeps_every_word_as_written_and_splits_at_apostrophes() -> None:
    assert Analyzer("none").terms("What did Caroline's agencies do?") == [
        "what", "did", "caroline", "s", "agencies", "do"]


@pytest.mark.parametrize(("language", "document", "query"), [
    ("german", "Die Kinder spielen im Garten hinter den Häusern", "Haus Kind Spiele"),
    ("spanish", "Los niños estaban corriendo por las calles del pueblo", "niño corre calle"),
    ("french", "Les enfants jouaient dans les jardins", "enfant jardin"),
])
def test_other_languages_stem_and_drop_their_own_stopwords(language: str, document: str, query: str) -> None:
    analyzer = Analyzer(language)
    assert set(analyzer.terms(query)) <= set(analyzer.terms(document))
    assert not set(analyzer.terms(document)) & stopwords(language)


@pytest.mark.parametrize(("text", "expected"), [
    ("東京都に住んでいます", ["東京", "京都", "都に", "に住", "住ん", "んで", "でい", "いま", "ます"]),
    ("我喜欢猫", ["我喜", "喜欢", "欢猫"]),
    ("서울에 살아요", ["서울", "울에", "살아", "아요"]),
    ("ภาษาไทย", ["ภา", "าษ", "ษา", "าไ", "ไท", "ทย"]),
    ("猫", ["猫"]),
])
def test_scripts_without_spaces_become_overlapping_bigrams(text: str, expected: list[str]) -> None:
    assert english.terms(text) == expected


def test_a_few_characters_of_chinese_or_japanese_find_the_text_that_holds_them() -> None:
    for document, query in [("我们的部署流程使用持续集成", "部署流程"), ("来週の会議は東京で行います", "東京の会議")]:
        assert set(english.terms(query)) & set(english.terms(document))


def test_latin_words_beside_cjk_are_analyzed_as_words() -> None:
    assert english.terms("Deploying 東京 servers") == ["deploy", "server", "東京"]


def test_a_memorys_summary_counts_more_than_its_content() -> None:
    counts = english.document("deploy_steps", "how we deploy", "We deploy with GitHub Actions")
    assert counts == {"deploy": 2 * SUMMARY_WEIGHT + 1, "step": SUMMARY_WEIGHT, "github": 1, "action": 1}


def test_every_snowball_language_and_none_can_be_chosen_and_nothing_else() -> None:
    assert {"none", "english", "german", "spanish", "russian"} <= set(languages())
    for language in languages():
        Analyzer(language).terms("text")
    with pytest.raises(ValueError, match="unknown search language 'klingon'"):
        Analyzer("klingon")


def test_the_identity_names_the_language_the_rules_and_the_stemmer() -> None:
    assert english.identity.startswith("english/1/pystemmer-")
    assert Analyzer("none").identity == "none/1"
    again = Analyzer.of(english.identity)
    assert again is not None and again.identity == english.identity
    assert Analyzer.of("english/0/pystemmer-0.1") is None
    assert Analyzer.of("klingon/1") is None


def test_the_remembered_stems_start_over_when_full_and_the_terms_stay_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("projections.search.analysis.CACHE_WORDS", 8)
    analyzer, unbounded = Analyzer(), Analyzer()
    texts = ["researching agencies", *(" ".join(f"running{a}{b}" for b in string.ascii_lowercase[:5])
                                      for a in string.ascii_lowercase[:6]), "runningfa researching agencies runningaa runningab"]
    for text in texts:
        assert analyzer.terms(text) == unbounded.terms(text)
    assert len(analyzer._terms) <= 8


@given(st.text(max_size=200))
def test_terms_are_lowercase_and_never_stopwords_or_blank(text: str) -> None:
    for term in english.terms(text):
        assert term and term == term.lower() and not any(character.isspace() for character in term)
        assert term not in stopwords("english")


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_analyzing_is_the_same_every_time_and_in_every_analyzer(text: str) -> None:
    assert english.terms(text) == english.terms(text) == Analyzer().terms(text)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=200), st.sampled_from(["english", "none"]))
def test_ascii_text_splits_as_it_would_beside_other_scripts(text: str, language: str) -> None:
    """ASCII text takes a faster path than other text: the words must be the same either way."""
    analyzer = Analyzer(language)
    assert sorted(analyzer.terms(f"{text} é")) == sorted([*analyzer.terms(text), "é"])

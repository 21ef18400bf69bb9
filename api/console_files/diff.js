// A diff of two texts by word (by line when that would be too big): the longest common subsequence, each
// part kept, added or removed.
import { el } from "./dom.js";

const MAX_CELLS = 2_000_000;

function tokens(text, byLine) {
  return byLine ? text.split(/(?<=\n)/) : text.split(/(\s+)/).filter((token) => token !== "");
}

export function diffParts(before, after) {
  let a = tokens(before, false);
  let b = tokens(after, false);
  if (a.length * b.length > MAX_CELLS) {
    a = tokens(before, true);
    b = tokens(after, true);
  }
  const lengths = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lengths[i][j] = a[i] === b[j] ? lengths[i + 1][j + 1] + 1 : Math.max(lengths[i + 1][j], lengths[i][j + 1]);
    }
  }
  const parts = [];
  const push = (kind, text) => {
    const last = parts[parts.length - 1];
    if (last && last.kind === kind) last.text += text;
    else parts.push({ kind, text });
  };
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] === b[j]) { push("same", a[i]); i++; j++; }
    else if (lengths[i + 1][j] >= lengths[i][j + 1]) push("removed", a[i++]);
    else push("added", b[j++]);
  }
  while (i < a.length) push("removed", a[i++]);
  while (j < b.length) push("added", b[j++]);
  return parts;
}

export function diffView(before, after) {
  if (before === after) return el("p", { class: "diff" }, el("span", { class: "same" }, "(unchanged) "), before);
  return el("p", { class: "diff" }, diffParts(before, after).map(({ kind, text }) =>
    kind === "same" ? text
      : el(kind === "added" ? "ins" : "del", { "aria-label": kind === "added" ? `added: ${text}` : `removed: ${text}` },
        text)));
}

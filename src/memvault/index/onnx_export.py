"""Exporting the bundled model to ONNX: the one place memvault runs torch for it.

Run as a child process by :class:`memvault.index.local_model.ModelFile`
(``python -m memvault.index.onnx_export FILE``), so torch never enters the
memory of a process that embeds. The graph takes token ids, attention mask
and token types and returns sentence-transformers' vectors for them: the
encoder's token vectors, mean-pooled over the attention mask, L2-normalised.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memvault.index.local_model import INPUTS, OUTPUT, quiet_offline, weights_dir


def export(dest: Path) -> None:
    """Write the ONNX file for the installed weights to ``dest``, atomically.

    Batch size and sequence length are left open. The file is written under
    a temporary name in the same folder, synced, then renamed.
    """
    import warnings

    quiet_offline()
    warnings.filterwarnings("ignore")  # the legacy exporter's advisories; errors still raise
    import torch
    from transformers import AutoModel

    # Eager attention exports as plain MatMul/Softmax, which ONNX Runtime fuses.
    encoder = AutoModel.from_pretrained(str(weights_dir()), attn_implementation="eager")

    class SentenceEmbedding(torch.nn.Module):
        """The encoder, mean pooling and normalisation: sentence-transformers' pipeline."""

        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            tokens = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            )[0]
            weights = attention_mask.unsqueeze(-1).to(tokens.dtype)
            pooled = (tokens * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    # A padded example, so the traced graph keeps the attention mask's path.
    ids = torch.full((2, 8), 1000, dtype=torch.int64)
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    axes = {name: {0: "batch", 1: "sequence"} for name in INPUTS}
    dest.parent.mkdir(parents=True, exist_ok=True)
    temporary = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with torch.no_grad():
            torch.onnx.export(
                SentenceEmbedding().eval(),
                (ids, mask, torch.zeros_like(ids)),
                str(temporary),
                dynamo=False,
                opset_version=17,
                input_names=list(INPUTS),
                output_names=[OUTPUT],
                dynamic_axes={**axes, OUTPUT: {0: "batch"}},
            )
        with temporary.open("rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, dest)
    finally:
        temporary.unlink(missing_ok=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m memvault.index.onnx_export FILE``: the child that runs the export."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -m memvault.index.onnx_export FILE\n")
        return 2
    try:
        export(Path(args[0]))
    except Exception as exc:  # the parent reads the last line of stderr as the reason
        sys.stderr.write(f"{type(exc).__name__}: {exc}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

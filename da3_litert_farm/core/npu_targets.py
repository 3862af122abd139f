"""The Qualcomm chips the farm can compile a cell for ahead of time (stage npu@CELL), one place for their facts.

Each name is one LiteRT's Qualcomm compiler plugin takes (ai_edge_litert 2.3.0's `SocModel`; tests/test_npu.py
checks the two lists agree). The SoC id and HTP architecture are what Qualcomm's HTP simulator is told to be
(onnxruntime-qnn's `soc_model` and `htp_arch`), as LiteRT's and ExecuTorch's Qualcomm SoC tables give them; a chip
whose id is not known here can be compiled for but not simulated. Standard library only: params and the client
read it.
"""

from __future__ import annotations

from typing import NamedTuple


class QualcommChip(NamedTuple):
    soc_id: int | None  # QNN's SoC model number; None: not known to the farm, so not simulated
    htp_arch: int | None  # Hexagon tensor processor generation (v68 ... v81)
    product: str  # what phones and cars call it


QUALCOMM = {
    "SA8255": QualcommChip(52, 73, "Snapdragon Ride (automotive)"),
    "SA8295": QualcommChip(39, 68, "Snapdragon Cockpit (automotive)"),
    "SM8350": QualcommChip(30, 68, "Snapdragon 888"),
    "SM8450": QualcommChip(36, 69, "Snapdragon 8 Gen 1"),
    "SM8475": QualcommChip(42, 69, "Snapdragon 8+ Gen 1"),
    "SM8550": QualcommChip(43, 73, "Snapdragon 8 Gen 2"),
    "SM8650": QualcommChip(57, 75, "Snapdragon 8 Gen 3"),
    "SM8750": QualcommChip(69, 79, "Snapdragon 8 Elite"),
    "SM8845": QualcommChip(None, None, "Snapdragon (SM8845)"),
    "SM8850": QualcommChip(87, 81, "Snapdragon 8 Elite Gen 5"),
}


def simulable(name: str) -> bool:
    """Whether the HTP simulator can be set up as chip `name` (its SoC id and arch are known)."""
    chip = QUALCOMM.get(name)
    return chip is not None and chip.soc_id is not None and chip.htp_arch is not None

"""The letterbox penalty: geometry, and real figures on the stress model at a small shape."""

from __future__ import annotations

import torch
from torch.utils.flop_counter import FlopCounterMode

from da3_litert_farm.checks.letterbox import depth_and_macs, letterbox, letterbox_penalty
from da3_litert_farm.model.official import official_depth
from tests.conftest import SMALL


def test_letterbox_centres_the_image_in_a_zero_padded_square():
    image = torch.randn(1, 3, 70, 112)
    square, (rows, cols) = letterbox(image)
    assert square.shape == (1, 3, 112, 112) and (rows.start, rows.stop, cols.start, cols.stop) == (21, 91, 0, 112)
    assert torch.equal(square[..., rows, cols], image)
    assert square[..., :21, :].abs().sum() == 0 and square[..., 91:, :].abs().sum() == 0


def plain_macs(model, height: int, width: int) -> int:
    """torch's own count of the official forward, which leaves out the CPU attention kernel."""
    with FlopCounterMode(display=False) as plain:
        official_depth(model, torch.zeros(1, 3, height, width))
    return plain.get_total_flops() // 2


def attention_macs(height: int, width: int) -> int:
    """QK^T and AV in each of the 12 blocks: 2 * tokens^2 * 384 (6 heads of 64)."""
    tokens = (height // 14) * (width // 14) + 1  # patches + the class token
    return 12 * 2 * tokens**2 * 384


def test_penalty_on_the_official_model(stress_net):
    height, width = SMALL
    box = letterbox_penalty(stress_net, ("motorcycle_left", "coffee"), height, width)
    assert box["square"] == [224, 224] and set(box["photos"]) == {"motorcycle_left", "coffee"}
    # Padding changes what global attention sees, so the crop is not the native depth...
    assert 0 < box["pearson_min"] < 0.9999 and box["mean_rel_error_max"] > 1e-3
    # ...and costs more than the pixel ratio in arithmetic (224*224 / 126*224), attention being quadratic.
    assert 224 / 126 < box["mac_ratio_square_to_native"] < (224 / 126) ** 2
    for key, (h, w) in {"macs_native": SMALL, "macs_square": (224, 224)}.items():
        assert box[key] == plain_macs(stress_net, h, w) + attention_macs(h, w), key


def test_cpu_attention_is_counted(stress_net):
    """torch's counter skips the CPU SDPA kernel; ours adds 2*N*N*dim per block (QK^T and AV)."""
    image = torch.randn(1, 3, *SMALL)
    _, macs = depth_and_macs(stress_net, image)
    assert macs - plain_macs(stress_net, *SMALL) == attention_macs(*SMALL)


def test_no_penalty_for_a_square_aspect(stress_net):
    assert letterbox_penalty(stress_net, ("coffee",), 112, 112) is None

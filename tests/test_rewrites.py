"""Each rewrite is exact (patched == official on stress weights) and removes what it claims.

Exactness: a module-level rewrite is applied alone to the official model and the official
forward is compared with the untouched model. Graph: the official piece and its rewrite
are each converted with litert-torch and the offending op or rank is looked for.
"""

import copy

import pytest
import torch
from torch import nn
from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

from da3_litert_farm.model import rewrites
from da3_litert_farm.checks.gpu_lint import lint
from da3_litert_farm.model.mono_depth import MonoDepth, RewriteOptions
from da3_litert_farm.model.official import official_depth
from da3_litert_farm.model.photo_input import load_photo_tensor
from tests.conftest import SMALL

SHAPES = [SMALL, (224, 126)]  # landscape and portrait grids
TOLERANCE = 1e-4  # of the output range, as the issue asks


def assert_same_depth(net_a, net_b, shape, tolerance=TOLERANCE, exact=False):
    image = load_photo_tensor("astronaut", *shape)
    a, b = official_depth(net_a, image), official_depth(net_b, image)
    err = float((a - b).abs().max())
    if exact:
        assert err == 0.0
    assert err <= tolerance * float(a.max() - a.min()), err


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(
    "rewrite",
    [
        pytest.param(lambda net, h, w: rewrites.bake_rope(net.backbone.pretrained, h, w), id="bake_rope"),
        pytest.param(lambda net, h, w: rewrites.split_qkv(net.backbone.pretrained), id="split_qkv"),
        pytest.param(lambda net, h, w: rewrites.fold_layerscale(net.backbone.pretrained), id="fold_layerscale"),
        pytest.param(lambda net, h, w: rewrites.replace_transpose_convs(net.head, "pixel_shuffle"),
                     id="pixel_shuffle"),
        pytest.param(lambda net, h, w: rewrites.replace_transpose_convs(net.head, "zero_stuff"), id="zero_stuff"),
        pytest.param(lambda net, h, w: rewrites.shorten_output_sums(net.head), id="short_output_sums"),
    ],
)
def test_module_rewrite_alone_is_exact(stress_net, fresh_net, rewrite, shape):
    rewrite(fresh_net, *shape)
    assert_same_depth(stress_net, fresh_net, shape)


@pytest.mark.parametrize("shape", SHAPES)
def test_attention_over_query_chunks_is_exact(stress_net, fresh_net, shape):
    vit = fresh_net.backbone.pretrained
    rewrites.split_qkv(vit)
    rewrites.chunk_attention_queries(vit, 50)  # 145 tokens: chunks of 50, 50, 45
    assert all(b.attn.query_chunk == 50 for b in vit.blocks)
    assert_same_depth(stress_net, fresh_net, shape)


def test_chunked_attention_graph_holds_no_full_score_tensor(stress_net, tmp_path):
    attn = rewrites.SplitQKVAttention(copy.deepcopy(stress_net.backbone.pretrained.blocks[0].attn))
    # 401 tokens: the score tensor (6 x 401 x 401) outweighs the 384 x 384 projection weights.
    x = torch.randn(1, 401, 384)
    whole = graph_of(Call(lambda t: attn(t), attn), x, tmp_path, "whole")
    attn.query_chunk = 150
    chunked = graph_of(Call(lambda t: attn(t), attn), x, tmp_path, "chunked")
    # The converter may drop the batch axis of a tensor; heads x queries x keys is what counts.
    assert whole.largest_tensor["shape"][-3:] == [6, 401, 401]
    assert chunked.largest_tensor["shape"][-3:] == [6, 150, 401]
    assert chunked.ok, chunked.problems


def test_rewrites_really_swapped_modules(fresh_net):
    vit = fresh_net.backbone.pretrained
    rewrites.bake_rope(vit, *SMALL)
    assert rewrites.split_qkv(vit) == 12  # DA3-Small: 12 blocks, one Attention each
    rewrites.fold_layerscale(vit)
    # The DPT head's 4x and 2x upsampling projections; its other two resize layers are not transpose convs.
    assert rewrites.replace_transpose_convs(fresh_net.head, "pixel_shuffle") == 2
    rewrites.shorten_output_sums(fresh_net.head)
    assert all(isinstance(b.attn, rewrites.SplitQKVAttention) for b in vit.blocks)
    last = fresh_net.head.scratch.output_conv2
    assert isinstance(last[0], rewrites.ShortSumConv2d) and isinstance(last[-1], rewrites.ShortSumConv2d)
    assert sum(isinstance(b.attn.rope, rewrites.BakedRope) for b in vit.blocks) == 8  # blocks 4..11
    assert all(isinstance(b.ls1, nn.Identity) and isinstance(b.ls2, nn.Identity) for b in vit.blocks)
    assert not any(isinstance(m, nn.ConvTranspose2d) for m in fresh_net.modules())


def test_swap_modules_swaps_each_match_whole_and_once():
    shared = nn.LayerNorm(4)
    inner = nn.Sequential(nn.LayerNorm(4))
    model = nn.ModuleDict({"a": nn.Sequential(shared, nn.Linear(4, 4)), "b": nn.Sequential(nn.Linear(4, 4), shared),
                           "c": nn.Sequential(inner)})
    assert rewrites.swap_modules(model, lambda m: isinstance(m, nn.LayerNorm), lambda m: nn.Identity()) == 2
    assert model["a"][0] is model["b"][1] and isinstance(model["a"][0], nn.Identity)  # a tie stays a tie
    assert isinstance(inner[0], nn.Identity)
    # A match is swapped whole: the walk does not go into it (c's inner Sequential is not offered).
    offered = []
    assert rewrites.swap_modules(model, lambda m: isinstance(m, nn.Sequential),
                                 lambda m: offered.append(m) or nn.Identity()) == 3
    assert [type(m) for m in model.values()] == [nn.Identity] * 3 and inner not in offered
    # The model itself is never swapped.
    norm = nn.LayerNorm(4)
    assert rewrites.swap_modules(norm, lambda m: isinstance(m, nn.LayerNorm), lambda m: nn.Identity()) == 0


@pytest.mark.parametrize("kernel, groups", [(3, 1), (3, 4), (1, 4), (5, 2)])
def test_short_sum_conv_is_the_conv(kernel, groups):
    torch.manual_seed(0)
    conv = nn.Conv2d(16, 5, kernel, padding=kernel // 2)
    short = rewrites.ShortSumConv2d(conv, groups)
    x = torch.randn(1, 16, 9, 13)
    with torch.no_grad():
        assert torch.allclose(short(x), conv(x), rtol=1e-5, atol=1e-6)
    assert len(short.taps) * 16 // short.group == kernel * kernel * groups  # that many short sums


def test_short_sum_conv_refuses_what_it_cannot_split():
    for conv, groups in ((nn.Conv2d(8, 8, 3, stride=2, padding=1), 1), (nn.Conv2d(8, 8, 3, padding=0), 1),
                         (nn.Conv2d(8, 8, 3, padding=1, groups=2), 1), (nn.Conv2d(6, 4, 1), 4)):
        with pytest.raises(ValueError, match="ShortSumConv2d takes a stride-1 'same' conv"):
            rewrites.ShortSumConv2d(conv, groups)


def test_baked_rope_refuses_another_grid(fresh_net):
    vit = fresh_net.backbone.pretrained
    rewrites.bake_rope(vit, *SMALL)
    with pytest.raises(ValueError, match="not baked for"):
        official_depth(fresh_net, load_photo_tensor("astronaut", 224, 126))


@pytest.mark.parametrize("shape", SHAPES)
def test_single_view_forward_alone_is_bit_exact(stress_net, fresh_net, shape):
    """Rank-4 input, torch.cat camera token, baked pos-embeds, depth-only head: no rounding change."""
    mono = MonoDepth(fresh_net, *shape, RewriteOptions(False, False, False, None, layernorm_shift=None,
                                                       short_output_sums=False, separable_pos_embed=False)).eval()
    image = load_photo_tensor("coffee", *shape)
    with torch.no_grad():
        assert torch.equal(mono(image), official_depth(stress_net, image))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("upsampler", rewrites.UPSAMPLERS)
def test_all_rewrites_together_are_exact(stress_net, fresh_net, shape, upsampler):
    mono = MonoDepth(fresh_net, *shape, RewriteOptions(upsampler=upsampler)).eval()
    image = load_photo_tensor("rocket", *shape)
    ref = official_depth(stress_net, image)
    with torch.no_grad():
        err = float((mono(image) - ref).abs().max())
    assert err <= TOLERANCE * float(ref.max() - ref.min())


@pytest.mark.parametrize("shift", [4, 8])
def test_prescaled_layernorms_are_bit_exact(stress_net, fresh_net, shift):
    """x * 2^-shift with eps * 2^-2shift: every rounding the same, on plain and outlier weights."""
    from da3_litert_farm.model.stress import stress_model

    for reference, net in ((stress_net, fresh_net), (stress_model(0, outliers=True), None)):
        net = net or copy.deepcopy(reference)
        norms = sum(isinstance(m, nn.LayerNorm) for part in (net.backbone, net.head) for m in part.modules())
        swapped = rewrites.prescale_layernorms(net.backbone, shift) + rewrites.prescale_layernorms(net.head, shift)
        modules = [*net.backbone.modules(), *net.head.modules()]
        # 12 blocks x (norm1, norm2), 8 x (q_norm, k_norm), the final norm, the head's and its aux head's
        assert norms == swapped == 43 and sum(isinstance(m, rewrites.PrescaledLayerNorm) for m in modules) == norms
        # The aux head's norm, tied across its four output convs, is still one module.
        assert len({id(branch[2]) for branch in net.head.scratch.output_conv2_aux}) == 1
        assert not any(isinstance(m, nn.LayerNorm) for m in modules)
        assert_same_depth(reference, net, SMALL, exact=True)


def test_separable_head_pos_embed_is_bit_exact(stress_net):
    head = stress_net.head
    h, w = SMALL
    for channels, size in [(48, (9, 16)), (384, (9, 16)), (32, (h, w))]:
        x = torch.randn(1, channels, *size)
        official = head._add_pos_embed(x, w, h)
        ours = rewrites.SeparableUVPosEmbed(channels, *size, image_height=h, image_width=w)(x)
        assert torch.equal(ours, official)


def test_baked_pos_embed_is_the_official_interpolation(stress_net):
    vit = stress_net.backbone.pretrained
    n = (SMALL[0] // 14) * (SMALL[1] // 14)
    official = vit.interpolate_pos_encoding(torch.zeros(1, 1 + n, 384), *SMALL)
    tokens = torch.zeros(1, 1 + n, 384)
    assert torch.equal(rewrites.BakedPosEmbed(vit, *SMALL)(tokens, torch.zeros(1, 3, *SMALL)), official)


@pytest.mark.parametrize("shape", [SMALL, (896, 504), (504, 896), (518, 518)])
def test_separable_pos_embed_is_the_official_interpolation(stress_net, shape):
    """rows @ grid @ cols^T (FP16 high + low parts) against the official bicubic table, to FP32 rounding."""
    vit = stress_net.backbone.pretrained
    n = (shape[0] // 14) * (shape[1] // 14)
    official = vit.interpolate_pos_encoding(torch.zeros(1, 1 + n, 384), *shape).detach()
    tokens = torch.randn(1, 1 + n, 384)
    ours = rewrites.SeparablePosEmbed(vit, *shape)(tokens, torch.randn(1, 3, *shape))
    torch.testing.assert_close(ours - tokens, official, rtol=0, atol=4e-6)
    # Per shape it stores two small matrices, not the 1+N x 384 table.
    per_shape = sum(b.numel() for name, b in rewrites.SeparablePosEmbed(vit, *shape).named_buffers()
                    if name in ("rows_t", "cols_t"))
    assert per_shape == 2 * 37 * (shape[0] // 14 + shape[1] // 14)


# ---------------------------------------------------------------- graph: what each removes


class Call(nn.Module):
    """Wrap an official callable so litert-torch can convert it with fixed extra arguments."""

    def __init__(self, fn, owner: nn.Module | None = None):
        super().__init__()
        self.fn, self.owner = fn, owner

    def forward(self, x):
        return self.fn(x)


def graph_of(module: nn.Module, sample: torch.Tensor, tmp_path, name: str):
    import litert_torch

    path = tmp_path / f"{name}.tflite"
    litert_torch.convert(module.eval(), (sample,)).export(str(path))
    return lint(path, require_fp16=False)


def test_transpose_conv_rewrites_remove_transpose_conv(stress_net, tmp_path):
    deconv = copy.deepcopy(stress_net.head.resize_layers[0])  # ConvTranspose2d(48, 48, 4, stride 4)
    x = torch.randn(1, 48, 9, 16)
    assert graph_of(deconv, x, tmp_path, "deconv").op_histogram.get("TRANSPOSE_CONV") == 1
    for cls in (rewrites.PixelShuffleUpsample, rewrites.ZeroStuffUpsample):
        report = graph_of(cls(deconv), x, tmp_path, cls.__name__)
        assert "TRANSPOSE_CONV" not in report.op_histogram
        assert report.ok, report.problems


def _attention_input(net):
    vit = net.backbone.pretrained
    n = (SMALL[0] // 14) * (SMALL[1] // 14) + 1
    local, _ = rewrites.rope_positions(vit, *SMALL)
    return vit, torch.randn(1, n, 384), local


def test_split_qkv_removes_rank5(fresh_net, tmp_path):
    vit, x, pos = _attention_input(fresh_net)
    rewrites.bake_rope(vit, *SMALL)  # the official RoPE cannot be exported at all (next test)
    attn = vit.blocks[4].attn
    official = graph_of(Call(lambda t: attn(t, pos=pos), attn), x, tmp_path, "attn")
    assert official.max_rank == 5
    split = rewrites.SplitQKVAttention(attn)
    ours = graph_of(Call(lambda t: split(t, pos=pos), split), x, tmp_path, "split")
    assert ours.max_rank <= 4 and ours.ok, ours.problems


def test_bake_rope_makes_rope_exportable_without_gather(fresh_net, tmp_path):
    vit, _, pos = _attention_input(fresh_net)
    rope = vit.blocks[4].attn.rope
    q = torch.randn(1, 6, pos.shape[1], 64)
    # The official RoPE sizes its table with int(positions.max()): torch.export cannot trace that.
    with pytest.raises(GuardOnDataDependentSymNode,
                       match="Could not extract specialized integer from data-dependent expression"):
        graph_of(Call(lambda t: rope(t, pos), rope), q, tmp_path, "rope")
    baked = rewrites.BakedRope(rope, pos, (SMALL[0] // 14, SMALL[1] // 14), 64)
    report = graph_of(Call(lambda t: baked(t), baked), q, tmp_path, "baked")
    assert not {"GATHER", "GATHER_ND"} & set(report.op_histogram)
    assert report.ok, report.problems


def test_fold_layerscale_removes_two_muls_per_block(fresh_net, tmp_path):
    vit, x, pos = _attention_input(fresh_net)
    rewrites.bake_rope(vit, *SMALL)
    rewrites.split_qkv(vit)
    block = vit.blocks[4]
    before = graph_of(Call(lambda t: block(t, pos=pos), block), x, tmp_path, "block").op_histogram["MUL"]
    rewrites.fold_layerscale(vit)
    after = graph_of(Call(lambda t: block(t, pos=pos), block), x, tmp_path, "folded").op_histogram["MUL"]
    assert before - after == 2


def test_head_pos_embed_rewrite_removes_broadcast_to(stress_net, tmp_path):
    head = stress_net.head
    h, w = SMALL
    x = torch.randn(1, 48, 9, 16)
    official = graph_of(Call(lambda t: head._add_pos_embed(t, w, h)), x, tmp_path, "pe")
    assert official.op_histogram.get("BROADCAST_TO", 0) > 0
    ours = graph_of(rewrites.SeparableUVPosEmbed(48, 9, 16, h, w), x, tmp_path, "sep")
    assert "BROADCAST_TO" not in ours.op_histogram and ours.ok, ours.problems


def test_pos_embed_interpolation_emits_gather_nd(stress_net, tmp_path):
    vit = stress_net.backbone.pretrained
    n = (SMALL[0] // 14) * (SMALL[1] // 14)
    x = torch.zeros(1, 1 + n, 384)
    official = graph_of(Call(lambda t: t + vit.interpolate_pos_encoding(t, *SMALL), vit), x, tmp_path, "posemb")
    assert official.op_histogram.get("GATHER_ND", 0) > 0


@pytest.fixture(scope="module")
def official_graph(stress_net, tmp_path_factory):
    """The official forward (with the module rewrites, so it exports) at SMALL: [1,1,3,H,W] input."""
    net = copy.deepcopy(stress_net)
    vit = net.backbone.pretrained
    rewrites.bake_rope(vit, *SMALL)
    rewrites.split_qkv(vit)
    rewrites.fold_layerscale(vit)
    rewrites.replace_transpose_convs(net.head, "pixel_shuffle")
    sample = torch.zeros(1, 1, 3, *SMALL)  # the official API's [B, S, 3, H, W]
    return graph_of(Call(lambda x: net(x)["depth"], net), sample, tmp_path_factory.mktemp("official"), "official")


def test_official_forward_graph_has_what_mono_depth_removes(official_graph):
    """Rank-5 input, SELECT_V2 (camera token), GATHER_ND (pos-embed), BROADCAST_TO (head)."""
    assert official_graph.max_rank == 5
    for op in ("SELECT_V2", "GATHER_ND", "BROADCAST_TO"):
        assert official_graph.op_histogram.get(op, 0) > 0, op
    assert any("rank 5" in p for p in official_graph.problems)


def test_mono_depth_graph_is_gpu_clean(small_tflite):
    fp32, _ = small_tflite
    report = lint(fp32, require_fp16=False)
    assert report.ok, report.problems
    assert report.max_rank <= 4
    assert not {"SELECT_V2", "GATHER_ND", "GATHER", "BROADCAST_TO", "TRANSPOSE_CONV"} & set(report.op_histogram)
    # align_corners=True resizes stay exact and GPU-legal (align_corners without half_pixel_centers)
    assert report.op_histogram["RESIZE_BILINEAR"] == 5

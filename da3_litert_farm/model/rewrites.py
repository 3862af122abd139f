"""GPU-clean rewrites of the official DA3 modules. Every one is exact (two move or reorder roundings).

Each rewrite is a small named transform. The module-level ones work like torchao's
`quantize_`: a function over an official model that swaps matching submodules in place
(one walk for all of them, `swap_modules`), keeping the official call signature, so the
official forward still runs on the result (that is how the tests prove each one exact on its
own). The shape-specific ones build the constants that `da3_litert_farm.model.mono_depth` bakes
into its single-view forward.

Why the GPU needs them: the LiteRT GPU delegate (ML Drift) takes only static graphs of
tensors of rank <= 4 and rejects GATHER/GATHER_ND, BROADCAST_TO, TRANSPOSE_CONV and
SELECT_V2; `da3_litert_farm.checks.gpu_lint` checks the exported file for exactly that.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Literal

import torch
import torch.nn.functional as F
from depth_anything_3.model.dinov2.layers.attention import Attention
from depth_anything_3.model.dinov2.layers.rope import RotaryPositionEmbedding2D
from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer
from depth_anything_3.model.utils.head_utils import create_uv_grid, position_grid_to_embed
from torch import nn

Upsampler = Literal["pixel_shuffle", "zero_stuff"]
UPSAMPLERS: tuple[str, ...] = ("pixel_shuffle", "zero_stuff")


def swap_modules(model: nn.Module, matches: Callable[[nn.Module], bool],
                 replace: Callable[[nn.Module], nn.Module]) -> int:
    """Replace every submodule of `model` for which `matches` is true by `replace(submodule)`, in
    place; return how many modules were replaced.

    A matching module is swapped whole: the walk does not go into it. One module registered under
    several parents (a tied norm) gets one replacement, so it stays tied. `model` itself is not
    swapped.
    """
    replaced: dict[int, nn.Module] = {}

    def walk(parent: nn.Module) -> None:
        for name, child in list(parent.named_children()):
            if matches(child):
                if id(child) not in replaced:
                    replaced[id(child)] = replace(child)
                setattr(parent, name, replaced[id(child)])
            else:
                walk(child)

    walk(model)
    return len(replaced)


# --------------------------------------------------------------------------- backbone


def uses_global_attention(vit: DinoVisionTransformer, index: int) -> bool:
    """The official rule for which blocks attend across views (and see 'no-diff' positions)."""
    return vit.alt_start != -1 and index >= vit.alt_start and index % 2 == 1


def rope_positions(vit: DinoVisionTransformer, height: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """RoPE positions for one view at this shape, from the official helper: (local, global)."""
    local, global_ = vit._prepare_rope(1, 1, height, width, torch.device("cpu"))
    return local[:, 0], global_[:, 0]  # drop the view axis: [1, 1+N, 2]


class BakedRope(nn.Module):
    """2D RoPE with its cos/sin tables precomputed for one fixed token grid, stored separably.

    Replaces: `RotaryPositionEmbedding2D`, which sizes its tables with
    `int(positions.max()) + 1` (data dependent: torch.export cannot trace it) and looks them up
    with `F.embedding` (a GATHER the GPU delegate rejects).
    Size: full per-token tables would be 4 x 0.8 MB of FP32 constants at 896x672 (the
    quantizer leaves them FP32). RoPE-2D is separable: the first half of each head rotates
    with the row, the second half with the column. So a patch token gets
    `(t * R) * C + (swap(t) * R') * C'`, with per-row tables R, R' that are 1 on the column
    half and per-column tables C, C' that are 1 on the row half, all rank 4.
    Exact: multiplying by 1 is exact, so each element sees the official `t*cos + rot(t)*sin`
    with the same table values; rot's sign lives in R', C' (a*(-b) == -(a*b)). The special
    token sits at position 0 (cos 1, sin 0), where RoPE is the identity; checked at bake time.
    """

    def __init__(self, rope: RotaryPositionEmbedding2D, positions: torch.Tensor, grid: tuple[int, int],
                 head_dim: int):
        super().__init__()
        rows, cols = grid
        half, quarter = head_dim // 2, head_dim // 4
        cos, sin = rope._compute_frequency_components(half, int(positions.max()) + 1, positions.device,
                                                      torch.float32)
        special, patches = positions[0, 0], positions[0, 1:].reshape(rows, cols, 2)
        y, x = patches[:, 0, 0], patches[0, :, 1]  # row and column positions
        if not (torch.equal(patches[..., 0], y[:, None].expand(rows, cols))
                and torch.equal(patches[..., 1], x[None, :].expand(rows, cols))):
            raise ValueError("RoPE positions are not a row/column grid; the separable tables would not be exact")
        if not (bool((F.embedding(special, cos) == 1).all()) and bool((F.embedding(special, sin) == 0).all())):
            raise ValueError("the special token's RoPE is not the identity; it cannot be skipped exactly")
        ones = torch.ones(half)

        def signed(table):  # rot(v) = cat(-v[q:], v[:q]) == swap(v) * [-1.., +1..]
            return torch.cat((-table[:, :quarter], table[:, quarter:]), -1)

        # [1, rows, 1, head_dim] and [1, 1, cols, head_dim]
        self.register_buffer("row_cos", torch.cat((F.embedding(y, cos), ones.expand(rows, half)), -1)[None, :, None])
        self.register_buffer("row_sin", torch.cat((signed(F.embedding(y, sin)), ones.expand(rows, half)), -1)[None, :, None])
        self.register_buffer("col_cos", torch.cat((ones.expand(cols, half), F.embedding(x, cos)), -1)[None, None])
        self.register_buffer("col_sin", torch.cat((ones.expand(cols, half), signed(F.embedding(x, sin))), -1)[None, None])
        self.register_buffer("positions", positions.clone(), persistent=False)
        self.grid, self.quarter = grid, quarter

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor | None = None) -> torch.Tensor:
        if positions is not None and not torch.compiler.is_compiling():
            # Baked for one grid: refuse silently-wrong use at another shape.
            if positions.shape[-2:] != self.positions.shape[-2:] or not torch.equal(positions[:1], self.positions):
                raise ValueError("BakedRope called with positions it was not baked for")
        b, heads, n, d = tokens.shape
        if b != 1:
            raise ValueError("BakedRope is built for batch 1")
        q = self.quarter
        special, patches = tokens[:, :, :1], tokens[:, :, 1:].reshape(heads, *self.grid, d)
        swapped = torch.cat((patches[..., q:2 * q], patches[..., :q], patches[..., 3 * q:], patches[..., 2 * q:3 * q]),
                            dim=-1)
        rotated = patches * self.row_cos * self.col_cos + swapped * self.row_sin * self.col_sin
        return torch.cat((special, rotated.reshape(1, heads, n - 1, d)), dim=2)


def bake_rope(vit: DinoVisionTransformer, height: int, width: int) -> None:
    """Swap every block's RoPE for a `BakedRope` on the positions that block sees at HxW (none
    in a ViT without RoPE, the monocular series')."""
    if vit.rope is None:
        return
    local, global_ = rope_positions(vit, height, width)
    for i, block in enumerate(vit.blocks):
        if isinstance(block.attn.rope, RotaryPositionEmbedding2D):
            positions = global_ if uses_global_attention(vit, i) else local
            head_dim = block.attn.qkv.in_features // block.attn.num_heads
            grid = (height // vit.patch_size, width // vit.patch_size)
            block.attn.rope = BakedRope(block.attn.rope, positions, grid, head_dim)


class SplitQKVAttention(nn.Module):
    """Multi-head attention with separate q/k/v projections and only rank-4 tensors.

    Replaces: the official fused `qkv` Linear followed by a reshape to [B, N, 3, heads, d]
    and a permute to [3, B, heads, N, d]: rank-5 tensors, which the GPU delegate rejects
    (litert-torch's own rank-reduction pass does not catch DINOv2's pattern).
    Exact: q, k, v are the same rows of the same weight matrix; the attention math is the
    official `scaled_dot_product_attention` call.
    """

    def __init__(self, attn: Attention):
        super().__init__()
        dim = attn.qkv.in_features
        self.num_heads = attn.num_heads
        has_bias = attn.qkv.bias is not None
        self.q, self.k, self.v = (nn.Linear(dim, dim, bias=has_bias) for _ in range(3))
        for i, lin in enumerate((self.q, self.k, self.v)):
            lin.weight.data.copy_(attn.qkv.weight.data[i * dim : (i + 1) * dim])
            if has_bias:
                lin.bias.data.copy_(attn.qkv.bias.data[i * dim : (i + 1) * dim])
        self.q_norm, self.k_norm, self.rope, self.proj = attn.q_norm, attn.k_norm, attn.rope, attn.proj
        self.query_chunk: int | None = None  # set by `chunk_attention_queries`

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        return x.reshape(b, n, self.num_heads, c // self.num_heads).transpose(1, 2)

    def forward(self, x: torch.Tensor, pos=None, attn_mask=None) -> torch.Tensor:
        if attn_mask is not None:
            raise ValueError("SplitQKVAttention is for single-view inference: no attn_mask")
        b, n, c = x.shape
        q, k, v = self._heads(self.q(x)), self._heads(self.k(x)), self._heads(self.v(x))
        q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None and pos is not None:
            q, k = self.rope(q, pos), self.rope(k, pos)
        chunk = self.query_chunk
        if chunk is None or chunk >= n:
            x = F.scaled_dot_product_attention(q, k, v)
        else:
            x = torch.cat([F.scaled_dot_product_attention(q[:, :, i : i + chunk], k, v) for i in range(0, n, chunk)],
                          dim=2)
        return self.proj(x.transpose(1, 2).reshape(b, n, c))


def split_qkv(model: nn.Module) -> int:
    """Swap every official `Attention` for an equivalent `SplitQKVAttention`, in place; return how many."""
    return swap_modules(model, lambda m: isinstance(m, Attention), SplitQKVAttention)


def chunk_attention_queries(model: nn.Module, query_chunk: int) -> None:
    """Make every `SplitQKVAttention` attend `query_chunk` queries at a time, concatenated.

    Replaces: one [1, heads, N, N] score tensor per block. At 896x896 (N = 4097) it is about
    200 MB in FP16, over WebGPU's default 128 MiB storage-buffer binding, which some phone
    drivers enforce (or silently break above). `da3_litert_farm.core.tensor_plan` picks the chunk.
    Exact: softmax and the weighted sum of values are per query row, so each row is the same
    computation over the same keys; only the rows are computed in groups (slices of q are
    rank-4 STRIDED_SLICEs, joined with one CONCATENATION).
    """
    if query_chunk < 1:
        raise ValueError(f"query_chunk must be >= 1, got {query_chunk}")
    for module in model.modules():
        if isinstance(module, SplitQKVAttention):
            module.query_chunk = query_chunk


@torch.no_grad()
def fold_layerscale(vit: DinoVisionTransformer) -> None:
    """Fold each block's LayerScale gammas into the Linear before it and drop the MUL.

    Replaces: `ls1(attn(...))` and `ls2(mlp(...))`, a per-channel MUL after a Linear. The
    published conversion found the GPU delegate mis-lays-out the token dimension of that
    MUL (fully_connected {1,1,N,C} vs {N,1,1,C}); it is also 24 fewer ops.
    Exact in real arithmetic, (xW^T + b) * g == x (gW)^T + g b; in floats one rounding moves
    (measured: 1.5e-6 of the depth range at 896x504 on stress weights).
    """
    for block in vit.blocks:
        for scale_name, linear in (("ls1", block.attn.proj), ("ls2", block.mlp.fc2)):
            scale = getattr(block, scale_name)
            if isinstance(scale, nn.Identity):
                continue
            gamma = scale.gamma.detach()
            linear.weight.mul_(gamma[:, None])
            if linear.bias is not None:
                linear.bias.mul_(gamma)
            setattr(block, scale_name, nn.Identity())


class PrescaledLayerNorm(nn.Module):
    """LayerNorm of x * 2^-shift with eps * 2^-2shift: the same function, on smaller numbers.

    Replaces: every LayerNorm; its variance squares its input. The ones over the residual
    stream matter: on the GPU delegate in FP16 they overflow where DINOv2-family streams carry
    channels of a few hundred (x*x > 65504 from |x| > 256, and a long FP16 sum of squares sooner).
    Exact: multiplying by a power of two is exact in binary floating point (away from
    overflow and subnormals), the mean and variance scale by 2^-shift and 2^-2shift, and
    sqrt(2^-2shift * v) = 2^-shift * sqrt(v), so every rounding is the same as before.
    """

    def __init__(self, norm: nn.LayerNorm, shift: int):
        super().__init__()
        self.normalized_shape, self.weight, self.bias = norm.normalized_shape, norm.weight, norm.bias
        self.scale = 2.0 ** -shift
        self.eps = norm.eps * self.scale ** 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x * self.scale, self.normalized_shape, self.weight, self.bias, self.eps)


def prescale_layernorms(model: nn.Module, shift: int) -> int:
    """Swap every nn.LayerNorm in `model` for a PrescaledLayerNorm by 2^-shift (a norm shared by
    several paths, like the head's tied aux norm, stays one module); return how many."""
    return swap_modules(model, lambda m: isinstance(m, nn.LayerNorm), lambda norm: PrescaledLayerNorm(norm, shift))


class ShortSumConv2d(nn.Module):
    """A stride-1 conv as a pairwise sum of short convs: one 1x1 conv per kernel tap and
    channel group, the bias added last.

    Replaces: the head's last convs (`output_conv2`: 3x3 over 32 channels, then 1x1), whose
    error the depth amplifies most. LiteRT's GPU accelerator sums a conv's products in FP16,
    so its error grows with the sum's length (288 products for the 3x3). Measured with
    da3_litert_farm.dev.precision; see README "Where FP16 error enters".
    Exact up to FP32 reassociation: the same products, summed in another order.
    """

    def __init__(self, conv: nn.Conv2d, channel_groups: int):
        super().__init__()
        kh, kw = conv.kernel_size
        if (conv.stride != (1, 1) or conv.dilation != (1, 1) or conv.groups != 1 or conv.padding_mode != "zeros"
                or conv.padding != ((kh - 1) // 2, (kw - 1) // 2) or kh % 2 == 0 or kw % 2 == 0
                or conv.in_channels % channel_groups):
            raise ValueError(f"ShortSumConv2d takes a stride-1 'same' conv with odd kernel, groups=1 and "
                             f"in_channels divisible by {channel_groups}; got {conv}")
        self.padding = conv.padding
        self.taps = [(r, c) for r in range(kh) for c in range(kw)]
        self.group = conv.in_channels // channel_groups
        self.weight, self.bias = conv.weight, conv.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        height, width = x.shape[2:]
        (ph, pw), g = self.padding, self.group
        padded = F.pad(x, (pw, pw, ph, ph)) if ph or pw else x
        parts = [F.conv2d(padded[:, i:i + g, r:r + height, c:c + width], self.weight[:, i:i + g, r:r + 1, c:c + 1])
                 for r, c in self.taps for i in range(0, x.shape[1], g)]
        while len(parts) > 1:  # pairwise: no partial sum runs long
            parts = [sum(parts[i:i + 2]) for i in range(0, len(parts), 2)]
        out = parts[0]
        return out if self.bias is None else out + self.bias[None, :, None, None]


def shorten_output_sums(head: nn.Module) -> None:
    """The depth head's last convs as ShortSumConv2d: the 3x3 by kernel tap and groups of 32 input
    channels (32 products per sum at small's width, as at base's and large's), the 1x1 in 4 channel
    groups (8)."""
    convs = head.scratch.output_conv2
    convs[0] = ShortSumConv2d(convs[0], channel_groups=max(1, convs[0].in_channels // 32))
    convs[-1] = ShortSumConv2d(convs[-1], channel_groups=4)


class BakedPosEmbed(nn.Module):
    """The backbone's absolute position embedding for HxW as one constant table [1, 1+N, C].

    Replaces: the bicubic `interpolate` of the pretrained table on every forward. Its lowering
    emits 16 GATHER_ND (and on device a RESIZE with no runtime input), both rejected by the GPU
    delegate. Bit-exact: the constant *is* the official `interpolate_pos_encoding` output (its
    scale_factor with the 0.1 offset, not `size=`). Costs 1+N x C FP32 values in every file;
    `SeparablePosEmbed` (shipped) stores the shared 37x37 grid instead.
    """

    def __init__(self, vit: DinoVisionTransformer, height: int, width: int):
        super().__init__()
        n = (height // vit.patch_size) * (width // vit.patch_size)
        with torch.no_grad():
            table = vit.interpolate_pos_encoding(torch.zeros(1, 1 + n, vit.embed_dim), height, width)
        self.register_buffer("table", table.detach().clone())

    def forward(self, tokens: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        return tokens + self.table


class SeparablePosEmbed(nn.Module):
    """The backbone's absolute position embedding for HxW, computed from the shared 37x37 table.

    Replaces: the bicubic `interpolate`, like `BakedPosEmbed`, whose table (1+N x C FP32: 3.5 MB at
    896x504) is most of what differs between the files of two aspects, so a bundle of several
    aspects would store one per aspect.
    Bicubic interpolation is linear and separable: table = rows @ grid @ cols^T per channel, with
    the shared grid [1, C, 37, 37] and two small per-shape matrices (h x 37, w x 37), read off the
    official `interpolate_pos_encoding` itself (its scale_factor with the 0.1 offset, not
    `size=`). The grid is multiplied by a runtime 1 (the input clamped to [1, 1]), so the
    converter cannot fold the matmuls back into a per-shape table. The matrices become
    FULLY_CONNECTED weights, which ship in FP16 like every other weight; each is split into an
    FP16 high part and the FP16 rest (R = hi + lo), so FP16 storage keeps about 22 bits of it.
    (A BATCH_MATMUL with both operands at run time keeps FP32 too, but the GPU accelerator
    computed it wrong: measured.)
    Exact up to FP32 rounding (the matmuls add the same four nonzero products per axis);
    checked against the official table when built.
    """

    def __init__(self, vit: DinoVisionTransformer, height: int, width: int):
        super().__init__()
        table = vit.pos_embed.detach().float()
        channels, grid = table.shape[-1], int(round((table.shape[1] - 1) ** 0.5))
        rows, cols = height // vit.patch_size, width // vit.patch_size
        # Probe the official interpolation with row and column indicators: its response to
        # "1 on grid row k" is rows[:, k] on every column (each 1-D bicubic kernel sums to 1).
        if channels < 2 * grid:
            raise ValueError(f"{channels} channels cannot probe a {grid}x{grid} grid's rows and columns at once")
        probe = torch.zeros(1, 1 + grid * grid, channels)
        probe_grid = probe[0, 1:].view(grid, grid, channels)
        for k in range(grid):
            probe_grid[k, :, k] = 1.0
            probe_grid[:, k, grid + k] = 1.0
        with torch.no_grad(), _swapped_pos_embed(vit, probe):
            response = vit.interpolate_pos_encoding(torch.zeros(1, 1 + rows * cols, channels), height, width)
        response = response[0, 1:].view(rows, cols, channels)
        self.register_buffer("cls_pos", table[:, :1].clone())  # [1, 1, C], the same at every shape
        self.register_buffer("grid", table[0, 1:].view(grid, grid, channels).permute(2, 0, 1)[None].clone())
        self.register_buffer("rows_t", _fp16_parts(response[:, 0, :grid].T))  # [2, 37, h]
        self.register_buffer("cols_t", _fp16_parts(response[0, :, grid:2 * grid].T))  # [2, 37, w]
        with torch.no_grad():
            official = vit.interpolate_pos_encoding(torch.zeros(1, 1 + rows * cols, channels), height, width).detach()
            ours = self.table()
        scale = float(official.abs().max())
        if not torch.allclose(ours, official, rtol=0, atol=1e-6 * max(scale, 1e-30)):
            raise AssertionError("separable position embedding differs from the official interpolation; "
                                 "this rewrite would not be exact")

    def table(self, one: torch.Tensor | None = None) -> torch.Tensor:
        """[1, 1+N, C]: the class token's row, then the patch grid row-major."""
        grid = self.grid if one is None else self.grid * one
        by_cols = grid @ self.cols_t[0] + grid @ self.cols_t[1]  # [1, C, 37, w]
        by_cols = by_cols.transpose(2, 3)
        patches = by_cols @ self.rows_t[0] + by_cols @ self.rows_t[1]  # [1, C, w, h]
        patches = patches.permute(0, 3, 2, 1).reshape(1, -1, self.grid.shape[1])
        return torch.cat((self.cls_pos, patches), dim=1)

    def forward(self, tokens: torch.Tensor, image: torch.Tensor) -> torch.Tensor:
        # clamp(x, 1, 1) is 1 for every finite input, and no constant folder can tell.
        one = torch.clamp(image[:, :1, :1, :1], 1.0, 1.0)
        return tokens + self.table(one)


def _fp16_parts(matrix: torch.Tensor) -> torch.Tensor:
    """[2, ...]: the FP16 value of each element and the FP16 value of what that leaves out."""
    high = matrix.half().float()
    return torch.stack((high, (matrix - high).half().float()))


@contextlib.contextmanager
def _swapped_pos_embed(vit: DinoVisionTransformer, table: torch.Tensor) -> Iterator[None]:
    """Temporarily give `vit` another pos_embed table (to probe its interpolation)."""
    saved = vit.pos_embed
    vit.pos_embed = nn.Parameter(table, requires_grad=False)
    try:
        yield
    finally:
        vit.pos_embed = saved


# --------------------------------------------------------------------------- head


class PixelShuffleUpsample(nn.Module):
    """ConvTranspose2d(k=s, stride=s, padding=0) as a 1x1 conv plus a rank-4 pixel shuffle.

    Replaces: TRANSPOSE_CONV, which the mobile GPU delegate rejects. A stride-s, kernel-s
    transpose conv writes each input pixel into its own sxs output block, so it equals a
    1x1 conv to (s*s*O) channels followed by depth-to-space. torch's pixel_shuffle lowers to
    rank-6 tensors, so the interleave is done in two rank-4 steps (columns, then rows).
    Exact: each output is the same single dot product plus bias. s*s times less arithmetic
    than the zero-stuff form.
    """

    def __init__(self, deconv: nn.ConvTranspose2d):
        super().__init__()
        _check_patchify_deconv(deconv)
        cin, cout, s, _ = deconv.weight.shape
        self.s, self.cout = s, cout
        # Output channel order (b, a, o): column offset b outermost, as `forward` unpacks it.
        w = deconv.weight.detach().permute(3, 2, 1, 0).reshape(s * s * cout, cin, 1, 1)
        bias = deconv.bias.detach().repeat(s * s) if deconv.bias is not None else None
        self.conv = nn.Conv2d(cin, s * s * cout, 1, bias=bias is not None)
        self.conv.weight.data.copy_(w)
        if bias is not None:
            self.conv.bias.data.copy_(bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1:
            raise ValueError("PixelShuffleUpsample is built for batch 1")
        s, o = self.s, self.cout
        _, _, h, w = x.shape
        y = self.conv(x).reshape(s, s * o, h, w)  # [b, (a, o), h, w]
        y = y.permute(1, 2, 3, 0).reshape(s, o, h, w * s)  # interleave b into columns
        y = y.permute(1, 2, 0, 3).reshape(1, o, h * s, w * s)  # interleave a into rows
        return y


class ZeroStuffUpsample(nn.Module):
    """ConvTranspose2d(k=s, stride=s, padding=0) as zero-stuffing plus an ordinary conv.

    Replaces: TRANSPOSE_CONV, which the mobile GPU delegate rejects. Stuff s-1 zeros after
    every input pixel along columns and rows (PAD + RESHAPE on rank-4 tensors; a resize-
    and-mask form lowers to rank-8 BROADCAST_TO), pad s-1 zeros on the top/left and
    convolve with the spatially flipped kernel. Exact: every output is the same single
    product sum plus bias; the other taps multiply exact zeros.
    """

    def __init__(self, deconv: nn.ConvTranspose2d):
        super().__init__()
        _check_patchify_deconv(deconv)
        cin, cout, s, _ = deconv.weight.shape
        self.s = s
        self.conv = nn.Conv2d(cin, cout, s, bias=deconv.bias is not None)
        self.conv.weight.data.copy_(deconv.weight.detach().flip(2, 3).transpose(0, 1))
        if deconv.bias is not None:
            self.conv.bias.data.copy_(deconv.bias.detach())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 1:
            raise ValueError("ZeroStuffUpsample is built for batch 1")
        s = self.s
        _, c, h, w = x.shape
        cols = F.pad(x.reshape(c, h, w, 1), (0, s - 1)).reshape(c, h, 1, w * s)
        up = F.pad(cols, (0, 0, 0, s - 1)).reshape(1, c, h * s, w * s)
        return self.conv(F.pad(up, (s - 1, 0, s - 1, 0)))


def _check_patchify_deconv(deconv: nn.ConvTranspose2d) -> None:
    k, stride = deconv.kernel_size, deconv.stride
    if not (k[0] == k[1] == stride[0] == stride[1]) or deconv.padding != (0, 0) or deconv.groups != 1 \
            or deconv.output_padding != (0, 0) or deconv.dilation != (1, 1):
        raise ValueError(f"only ConvTranspose2d with kernel == stride and no padding is exact here: {deconv}")


def replace_transpose_convs(model: nn.Module, upsampler: Upsampler) -> int:
    """Swap every kernel==stride ConvTranspose2d for an exact GPU-clean upsampler, in place; return how many."""
    cls = {"pixel_shuffle": PixelShuffleUpsample, "zero_stuff": ZeroStuffUpsample}.get(upsampler)
    if cls is None:
        raise ValueError(f"upsampler {upsampler!r} is not one of {UPSAMPLERS}")
    return swap_modules(model, lambda m: isinstance(m, nn.ConvTranspose2d), cls)


class SeparableUVPosEmbed(nn.Module):
    """The DPT head's UV sin-cos position embedding for one fixed feature-map shape.

    Replaces: `DualDPT._add_pos_embed`, which builds a [C, h, w] table at run time and
    `expand`s it over the batch: BROADCAST_TO, rejected by the GPU delegate. Adding the
    full table as a constant would be exact but would store C*h*w floats (+58 MB FP32 at
    896x504 for the output map), and `x + A + B` lets the converter fold A+B back into that.
    The embedding is separable: its first C/2 channels depend on the column only, the last
    C/2 on the row only. So add a [1, C/2, 1, w] constant to one channel half and a
    [1, C/2, h, 1] constant to the other, then concatenate.
    Exact: every element receives the very same table value, added once.
    """

    def __init__(self, channels: int, height: int, width: int, image_height: int, image_width: int,
                 ratio: float = 0.1):
        super().__init__()
        # The official table, built with the official helpers and arguments.
        uv = create_uv_grid(width, height, aspect_ratio=image_width / image_height, dtype=torch.float32)
        table = (position_grid_to_embed(uv, channels) * ratio).permute(2, 0, 1)  # [C, h, w]
        half = channels // 2
        cols, rows = table[:half, :1, :], table[half:, :, :1]
        if not (torch.equal(table[:half], cols.expand_as(table[:half]))
                and torch.equal(table[half:], rows.expand_as(table[half:]))):
            raise AssertionError("head position embedding is not separable; this rewrite would not be exact")
        self.half = half
        self.register_buffer("cols", cols[None].clone())  # [1, C/2, 1, w]
        self.register_buffer("rows", rows[None].clone())  # [1, C/2, h, 1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat((x[:, : self.half] + self.cols, x[:, self.half :] + self.rows), dim=1)


# The converter names every tensor after the modules that made it (torch.export's nn_module_stack,
# "<module path>.<Class>_<attribute>"). Pinned to the path the shipped files have carried since
# the first build, so that where this code sits in the package never changes their bytes.
GRAPH_NAMES = "da3_litert_farm.rewrites"
for _module in [v for v in list(globals().values()) if isinstance(v, type) and issubclass(v, nn.Module)
                and v.__module__ == __name__]:
    _module.__module__ = GRAPH_NAMES

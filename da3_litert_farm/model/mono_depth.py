"""The GPU-clean monocular-depth module: official DA3 weights, single-view forward, fixed shape.

`MonoDepth` is the official forward specialized to one view and no camera input, written
with rank-4 tensors only:
- input [1, 3, H, W] instead of the official [B, S, 3, H, W] (a rank-5 model input);
- the camera token (any-view series) enters with `torch.cat` instead of `x[:, :, 0] = cam_token`
  (an in-place index assignment that lowers to SELECT_V2);
- the backbone position embedding and the head's UV embedding (DualDPT only) are baked for H x W
  (`rewrites.SeparablePosEmbed`, `rewrites.SeparableUVPosEmbed`);
- only the `depth` branch of the head is kept (DualDPT's ray branch and DPT's sky head never feed
  depth), and its last 1x1 conv keeps only the depth channel.
Output: [1, 1, H, W], the official `depth` (exp of the head's first channel); for the DPT head, before
the package's sky fill (core.models.OUTPUTS).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from depth_anything_3.model.da3 import DepthAnything3Net
from depth_anything_3.model.utils.head_utils import custom_interpolate
from torch import nn

from da3_litert_farm.model import rewrites


@dataclass(frozen=True)
class RewriteOptions:
    """Which module-level rewrites to apply (all on for a shipped model)."""

    bake_rope: bool = True
    split_qkv: bool = True
    fold_layerscale: bool = True
    upsampler: rewrites.Upsampler | None = "pixel_shuffle"  # None keeps TRANSPOSE_CONV
    attention_query_chunk: int | None = None  # from da3_litert_farm.core.tensor_plan; needs split_qkv
    # LayerNorms see x * 2^-shift: FP16 headroom for x*x on channels up to 256 * 2^shift (see
    # rewrites.PrescaledLayerNorm; measured with da3_litert_farm.dev.precision).
    layernorm_shift: int | None = 4
    # The head's last convs as short pairwise FP16 sums (rewrites.ShortSumConv2d; measured with
    # da3_litert_farm.dev.precision).
    short_output_sums: bool = True
    # The backbone position table computed from the shared 37x37 grid (rewrites.SeparablePosEmbed,
    # exact to FP32 rounding) instead of baked per shape (rewrites.BakedPosEmbed, bit-exact): what
    # lets a bundle of several aspects store almost nothing per aspect.
    separable_pos_embed: bool = True


class MonoDepth(nn.Module):
    def __init__(self, net: DepthAnything3Net, height: int, width: int,
                 options: RewriteOptions = RewriteOptions()):
        """Take the modules of `net` (which is consumed) and specialize them to HxW."""
        super().__init__()
        vit = net.backbone.pretrained
        head = net.head
        self.height, self.width = height, width
        self.patch_h, self.patch_w = height // vit.patch_size, width // vit.patch_size

        if options.bake_rope:
            rewrites.bake_rope(vit, height, width)
        if options.split_qkv:
            rewrites.split_qkv(vit)
        if options.attention_query_chunk is not None:
            if not options.split_qkv:
                raise ValueError("attention_query_chunk needs split_qkv")
            rewrites.chunk_attention_queries(vit, options.attention_query_chunk)
        if options.fold_layerscale:
            rewrites.fold_layerscale(vit)
        if options.upsampler is not None:
            rewrites.replace_transpose_convs(head, options.upsampler)
        if options.layernorm_shift is not None:
            rewrites.prescale_layernorms(vit, options.layernorm_shift)
            rewrites.prescale_layernorms(head, options.layernorm_shift)

        # Backbone (names follow the official modules).
        self.patch_embed, self.blocks, self.norm = vit.patch_embed, vit.blocks, vit.norm
        self.embed_dim = vit.embed_dim
        self.alt_start = vit.alt_start
        self.out_layers = tuple(net.backbone.out_layers)
        self.global_blocks = tuple(rewrites.uses_global_attention(vit, i) for i in range(len(vit.blocks)))
        self.rope_blocks = tuple(vit.rope is not None and i >= vit.rope_start for i in range(len(vit.blocks)))
        self.cat_token = vit.cat_token  # the head reads cat(local stream, normed stream), or the normed stream
        self.cls_token = nn.Parameter(vit.cls_token.detach().clone())
        if vit.alt_start != -1:
            # Single view: the official code puts the reference-view camera token at token 0.
            self.ref_camera_token = nn.Parameter(vit.camera_token.detach()[:, :1].clone())
        pos_embed = rewrites.SeparablePosEmbed if options.separable_pos_embed else rewrites.BakedPosEmbed
        self.pos_embed = pos_embed(vit, height, width)
        if vit.rope is not None:
            local, global_ = rewrites.rope_positions(vit, height, width)
            self.register_buffer("pos_local", local, persistent=False)
            self.register_buffer("pos_global", global_, persistent=False)

        # Head: its depth branch only (DualDPT's ray branch and DPT's sky head are dropped).
        self.head_norm, self.projects, self.resize_layers = head.norm, head.projects, head.resize_layers
        self.scratch = head.scratch
        for aux in ("refinenet1_aux", "refinenet2_aux", "refinenet3_aux", "refinenet4_aux",
                    "output_conv1_aux", "output_conv2_aux", "sky_output_conv2"):
            if hasattr(self.scratch, aux):
                delattr(self.scratch, aux)
        self.stage_pos_embed = nn.ModuleList(
            rewrites.SeparableUVPosEmbed(p.out_channels, self.patch_h, self.patch_w, height, width)
            if head.pos_embed else nn.Identity()
            for p in head.projects
        )
        self.output_pos_embed = rewrites.SeparableUVPosEmbed(
            head.scratch.output_conv1.out_channels, height, width, height, width
        ) if head.pos_embed else nn.Identity()
        self._keep_depth_channel_only()
        if options.short_output_sums:
            rewrites.shorten_output_sums(head)

    @torch.no_grad()
    def _keep_depth_channel_only(self) -> None:
        """The last conv's channel 0 is the depth logit; channel 1 is confidence, not shipped."""
        last = self.scratch.output_conv2[-1]
        depth_only = nn.Conv2d(last.in_channels, 1, last.kernel_size, last.stride, last.padding)
        depth_only.weight.copy_(last.weight[:1])
        depth_only.bias.copy_(last.bias[:1])
        self.scratch.output_conv2[-1] = depth_only

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        feats = self._backbone(image)
        return self._depth_head(feats)

    def forward_taps(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        """The same computation, returning its intermediates by name, in order (for
        da3_litert_farm.dev.precision): `embed`, `block00`.., `stage0`.., `refine4`..`refine1`,
        `output_conv1`, `upsampled`, `logit` and `depth`, the output."""
        taps: dict[str, torch.Tensor] = {}
        self._depth_head(self._backbone(image, taps), taps)
        return taps

    def _backbone(self, image: torch.Tensor, taps: dict | None = None) -> list[torch.Tensor]:
        taps = {} if taps is None else taps
        x = self.patch_embed(image)  # [1, N, C]
        x = self.pos_embed(torch.cat((self.cls_token, x), dim=1), image)
        taps["embed"] = x
        outputs, local_x = [], x
        for i, block in enumerate(self.blocks):
            if i == self.alt_start:  # official: x[:, :, 0] = cam_token
                x = torch.cat((self.ref_camera_token, x[:, 1:]), dim=1)
            pos = None
            if self.rope_blocks[i]:
                pos = self.pos_global if self.global_blocks[i] else self.pos_local
            x = block(x, pos=pos)
            taps[f"block{i:02d}"] = x
            if not self.global_blocks[i]:
                local_x = x
            if i in self.out_layers:
                # official: cat(local, x) then norm on the second half (or norm(x)), then drop the cls token
                out = torch.cat((local_x, self.norm(x)), dim=-1) if self.cat_token else self.norm(x)
                outputs.append(out[:, 1:])
        return outputs

    def _depth_head(self, feats: list[torch.Tensor], taps: dict | None = None) -> torch.Tensor:
        taps = {} if taps is None else taps
        resized = []
        for stage, x in enumerate(feats):
            x = self.head_norm(x)
            x = x.permute(0, 2, 1).reshape(1, x.shape[-1], self.patch_h, self.patch_w)
            x = self.projects[stage](x)
            x = self.stage_pos_embed[stage](x)
            resized.append(self.resize_layers[stage](x))
            taps[f"stage{stage}"] = resized[-1]

        s = self.scratch
        l1, l2, l3, l4 = (rn(x) for rn, x in zip((s.layer1_rn, s.layer2_rn, s.layer3_rn, s.layer4_rn), resized))
        out = taps["refine4"] = s.refinenet4(l4, size=l3.shape[2:])
        out = taps["refine3"] = s.refinenet3(out, l3, size=l2.shape[2:])
        out = taps["refine2"] = s.refinenet2(out, l2, size=l1.shape[2:])
        out = taps["refine1"] = s.refinenet1(out, l1)
        out = taps["output_conv1"] = s.output_conv1(out)
        out = custom_interpolate(out, (self.height, self.width), mode="bilinear", align_corners=True)
        out = taps["upsampled"] = self.output_pos_embed(out)
        logit = taps["logit"] = s.output_conv2(out)
        depth = taps["depth"] = torch.exp(logit)
        return depth


# Tensor names in the shipped files carry this path (see rewrites.GRAPH_NAMES): pinned, so that
# moving the code does not change their bytes.
MonoDepth.__module__ = "da3_litert_farm.mono_depth"

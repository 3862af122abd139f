"""The presets the farm converts (core.models): their sizes are the official networks', their
rewrites are exact, and a preset or checkpoint the farm cannot convert is refused by name."""

import pytest
import yaml

from da3_litert_farm.config.params import CheckpointParams, ParamsError, parse_params
from da3_litert_farm.core.models import NOT_CONVERTED, PRESETS, PresetError, preset
from da3_litert_farm.model.checkpoint import build_checkpoint
from da3_litert_farm.model.official import CheckpointError, build_official
from da3_litert_farm.model.patch import patch_model, shipped_options
from tests.farm_repo import REPO as REPO_ROOT


@pytest.mark.parametrize("name", list(PRESETS))
def test_each_presets_sizes_are_the_official_networks(name):
    net = build_official(name)  # the depth_anything_3 package's own config for the preset
    p = PRESETS[name]
    vit = net.backbone.pretrained
    assert (vit.embed_dim, vit.blocks[0].attn.num_heads, vit.blocks[0].mlp.fc1.out_features) == \
        (p.embed_dim, p.heads, p.mlp_hidden)
    head = net.head
    assert type(head).__name__.lower() == p.head
    assert [conv.out_channels for conv in head.projects] == list(p.head_out_channels)
    assert head.scratch.output_conv1.in_channels == p.head_features
    assert head.scratch.output_conv1.out_channels == p.head_features // 2
    conv_weights = {n: tuple(w.shape) for n, w in net.named_parameters() if w.dim() == 4}
    largest = max(conv_weights, key=lambda n: net.get_parameter(n).numel())
    o, i, kh, kw = conv_weights[largest]
    assert (o, kh, kw, i) == p.largest_weight, largest


@pytest.mark.parametrize("name", [name for name in PRESETS if name != "da3-small"])  # small: test_rewrites
def test_each_preset_converts_exactly_at_a_small_shape(name):
    from da3_litert_farm.model.stress import stress_model

    official = stress_model(seed=0, model_name=name, outliers=True)
    _, report = patch_model(official, 70, 112, shipped_options(PRESETS[name], 70, 112, 128))
    assert report["relative_error"] < 1e-5  # the gate is 1e-4; small measured 1.4e-6-1.8e-6 at this size


def test_presets_the_rewrites_do_not_cover_are_refused_by_name():
    supported = "da3-small, da3-base, da3-large, da3mono-large, da3metric-large"
    with pytest.raises(PresetError, match=rf"'da3-giant' is not one the farm converts \(ViT-G.*\); "
                                          rf"supported: {supported}$"):
        preset("da3-giant")
    with pytest.raises(CheckpointError, match="model_name: preset 'da3nested-giant-large'"):
        build_official("da3nested-giant-large")
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    for name in ("da3-giant", "DA3-SMALL"):
        raw["models"]["small"]["preset"] = name
        with pytest.raises(ParamsError, match=rf"^models.small.preset: '{name}' must be a Depth Anything 3 preset the "
                                              rf"farm converts: {supported} \(the package's others, "
                                              + ", ".join(NOT_CONVERTED)):
            parse_params(raw, checkpoint_files=False)


def test_the_tensor_plan_follows_the_preset():
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    model = raw["models"]["small"]  # no repo: it defaults to the preset's
    model["preset"] = "da3-base"
    base = parse_params(raw, checkpoint_files=False)
    assert base.preset("small") is PRESETS["da3-base"]
    model["preset"] = "da3-small"
    assert parse_params(raw, checkpoint_files=False).preset("small") is PRESETS["da3-small"]
    # Its head features [1, 898, 674, 64] (padded) are 74 MiB in FP16, twice small's (the preset's width).
    raw["max_tensor_mib"], raw["aspects"] = 64, {"3x4": {"ratio": "3:4"}}
    assert parse_params(raw, checkpoint_files=False).cells["small-896-3x4"].height == 896
    model["preset"] = "da3-base"
    with pytest.raises(ParamsError, match=r"aspects.3x4 at tier 896 for models.small \(da3-base\): 896x672 needs a "
                                          r"head features tensor of 74 MiB"):
        parse_params(raw, checkpoint_files=False)
    # The large presets' head runs at 256 features: at 896 its full-resolution features [1, 898, 674, 128] are
    # 148 MiB, over the default 128; at a 518 tier they fit.
    raw["max_tensor_mib"], model["preset"] = 128, "da3metric-large"
    with pytest.raises(ParamsError, match=r"aspects.3x4 at tier 896 for models.small \(da3metric-large\): 896x672 "
                                          r"needs a head features tensor of 148 MiB"):
        parse_params(raw, checkpoint_files=False)
    raw["tiers"] = [518]
    large = parse_params(raw, checkpoint_files=False)
    assert (large.cells["small-518-3x4"].height, large.cells["small-518-3x4"].width) == (518, 392)
    assert large.models["small"].repo == "depth-anything/DA3METRIC-LARGE"


def test_a_hub_repo_of_another_preset_is_refused_by_name():
    raw = yaml.safe_load((REPO_ROOT / "params.yaml").read_text())
    raw["models"]["small"].update(preset="da3mono-large", repo="depth-anything/DA3-SMALL")
    raw["tiers"] = [518]
    with pytest.raises(ParamsError, match=r"^models.small.repo: depth-anything/DA3-SMALL holds da3-small, not "
                                          r"models.small.preset da3mono-large; set models.small.repo: "
                                          r"depth-anything/DA3MONO-LARGE \(or leave it out"):
        parse_params(raw, checkpoint_files=False)
    raw["models"]["small"]["repo"] = "my-org/DA3MONO-LARGE-finetuned"  # a repo the farm does not know: the config decides
    assert parse_params(raw, checkpoint_files=False).models["small"].repo == "my-org/DA3MONO-LARGE-finetuned"


def test_a_checkpoint_of_another_preset_is_refused_before_loading(stress_checkpoint_dir, tmp_path):
    params = CheckpointParams("local", "da3-base", "depth-anything/DA3-BASE", "main", str(stress_checkpoint_dir), 0)
    with pytest.raises(CheckpointError, match=r"models.base.preset is 'da3-base', but .*'s config.json says "
                                              r"model_name 'da3-small': set models.base.preset: da3-small"):
        build_checkpoint(params, tmp_path, key="models.base")

import pytest

from da3_litert_farm.core.aspects import AspectError, Shape, closest_aspect, plan_aspect


@pytest.mark.parametrize(
    "entry, shape",
    [
        ({"ratio": "9:16"}, Shape(896, 504)),
        ({"ratio": "3:4"}, Shape(896, 672)),
        ({"ratio": "16:9"}, Shape(504, 896)),
        ({"ratio": "4:3"}, Shape(672, 896)),
        ({"ratio": "1:1"}, Shape(896, 896)),
        # 896 * 9 / 19.5 = 413.5 -> 29.5 patches, rounds up to 30 -> 420
        ({"ratio": "9:19.5"}, Shape(896, 420)),
        # 224 * 9 / 16 = 126 exactly
        # 896 * 2 / 3 = 597.33 -> 42.67 patches -> 43 -> 602
        ({"ratio": "2:3"}, Shape(896, 602)),
        ({"height": 126, "width": 224}, Shape(126, 224)),
    ],
)
def test_planner_shapes(entry, shape):
    assert plan_aspect("a", entry).shape == shape


def test_explicit_sizes_get_a_reduced_ratio():
    assert plan_aspect("a", {"height": 896, "width": 504}).ratio == "9:16"


def test_the_long_side_is_the_tier_the_caller_plans_at():
    assert plan_aspect("a", {"ratio": "9:16"}, 448).shape == Shape(448, 252)
    assert plan_aspect("a", {"ratio": "9:16"}, 224).shape == Shape(224, 126)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"ratio": "0:16"}, "positive numbers"),
        ({"ratio": "-9:16"}, "positive numbers"),
        ({"ratio": "nine:16"}, "positive numbers"),
        ({"ratio": "9/16"}, "positive numbers"),
        ({"ratio": "inf:1"}, "positive numbers"),
        ({"ratio": 1.5}, "positive numbers"),
        ({"ratio": "1:40"}, "below the minimum 56"),
        ({"ratio": "9:16", "height": 896}, "either ratio"),
        ({"height": 896}, "both height and width"),
    ],
)
def test_invalid_entries_name_the_aspect_and_rule(entry, message):
    """What the planner checks itself; keys, types and sides are the params schema's (tests/test_params.py)."""
    with pytest.raises(AspectError) as err:
        plan_aspect("a", entry)
    assert "aspects.a" in str(err.value)
    assert message in str(err.value)


CATALOG = [plan_aspect(n, {"ratio": r}) for n, r in [("9x16", "9:16"), ("3x4", "3:4"), ("16x9", "16:9")]]


@pytest.mark.parametrize(
    "camera, expected",
    [((1080, 1920), "9x16"), ((3024, 4032), "3x4"), ((1920, 1080), "16x9"), ((1080, 2400), "9x16"),
     ((4032, 3024), "16x9"),  # no 4:3 landscape model: 16:9 crops less of a 4:3 frame than 3:4 does
     ((1080, 1024), "3x4")],  # nearly square landscape: the portrait 3:4 model crops least
)
def test_closest_aspect(camera, expected):
    aspect, why = closest_aspect(CATALOG, *camera)
    assert aspect.name == expected
    assert aspect.name in why


def test_closest_aspect_tie_prefers_larger_model_then_name():
    small = plan_aspect("s", {"ratio": "1:1"}, 448)
    large = plan_aspect("l", {"ratio": "1:1"})
    assert closest_aspect([small, large], 100, 100)[0].name == "l"
    # 1:1 camera between 3:4 and 4:3 (equal distance in log space): the larger, then by name
    a = plan_aspect("a", {"ratio": "3:4"})
    b = plan_aspect("b", {"ratio": "4:3"})
    assert closest_aspect([b, a], 500, 500)[0].name == "a"


@pytest.mark.parametrize("camera, expected", [
    ((4032, 3024), "4x3"), ((3024, 4032), "3x4"),  # stills: the main sensor's 4:3, sideways and upright
    ((1920, 1080), "16x9"), ((1080, 1920), "9x16"),  # video
])
def test_default_aspects_cover_every_phone_camera_frame(camera, expected):
    """The shipped params.yaml: each frame a phone camera delivers gets a model within one patch of its ratio."""
    from pathlib import Path

    from da3_litert_farm.config.params import load_params

    params = load_params(Path(__file__).parents[1] / "params.yaml", checkpoint_files=False)
    aspect, _ = closest_aspect([c.aspect for c in params.cells.values()], *camera)
    assert aspect.name == expected
    # The centre crop keeps all but a sliver: the short side is the nearest multiple of 14 (half a patch off at most).
    kept = min(camera[0] / camera[1] * aspect.height / aspect.width, camera[1] / camera[0] * aspect.width / aspect.height)
    assert kept > 1 - 7 / 504

"""A cell's files compiled for Qualcomm NPUs, as an app build takes them: the one for its phone's chip
(`farm select|pull --soc`), what its sidecar adds, and a Play AI pack of every chip's file (`farm pull --ai-pack`).

Standard library only, like the rest of the client. A chip the catalog has no file for gets the cell's GPU file,
which runs on any phone's GPU, and the reason line says so.
"""

from __future__ import annotations

from pathlib import Path

# What an app needs beside a compiled file to run it on the NPU (docs/android.md, the NPU file).
RUNTIME = ("LiteRT's NPU runtime (CompiledModel with Accelerator.NPU) and Qualcomm's QNN runtime libraries of QAIRT "
           "{qairt} for HTP {arch} (libQnnHtp.so, libQnnSystem.so, libQnnHtp{v}Stub.so, libQnnHtp{v}Skel.so): "
           "delivered with Google Play's on-device AI features (the AI pack), or bundled by the app from Qualcomm's "
           "QAIRT SDK under its licence")
# Automotive chips: Play delivers AI packs to phones only (LiteRT's own AI pack export leaves these out too).
NOT_PHONES = ("SA8255", "SA8295")
AI_PACK_MODEL = "depth"  # the .tflite name inside an AI pack's device groups
# Play's device-targeting-config, as LiteRT's ai_pack export writes it (tests/test_npu_client.py compares).
_TARGETING = ('<config:device-targeting-config\n    xmlns:config="http://schemas.android.com/apk/config">\n'
              '{groups}\n</config:device-targeting-config>')
_GROUP = '    <config:device-group name="{name}">\n{selectors}\n    </config:device-group>'
_SELECTOR = ('        <config:device-selector>\n'
             '            <config:system-on-chip manufacturer="{maker}" model="{soc}"/>\n'
             '        </config:device-selector>')
_MAKERS = ("Qualcomm", "QTI")  # Play tells Qualcomm's chips by either manufacturer name


def compiled_for(entry: dict) -> dict[str, dict]:
    """The cell's NPU files by chip ({} when the farm compiled none, or before it could)."""
    npu = entry.get("npu") or {}
    return npu.get("targets", {}) if npu.get("compiled") else {}


def for_chip(entry: dict, soc: str) -> tuple[dict | None, str]:
    """The NPU file of cell `entry` for chip `soc` (None: the GPU file is the app's), and the reason line."""
    soc = soc.upper()
    targets = compiled_for(entry)
    if soc in targets:
        t = targets[soc]
        return t, f"Qualcomm {soc} ({t['product']}, HTP {t['htp_arch']}): the file compiled for its NPU"
    have = ", ".join(targets) or "none"
    return None, (f"no NPU file for {soc} in cell {entry['cell']} (compiled for: {have}): the GPU file, which runs on "
                  f"any phone's GPU")


def npu_file_name(catalog: dict, entry: dict, soc: str) -> str:
    return f"{catalog['name']}-{entry['cell']}-{entry['height']}x{entry['width']}-qualcomm-{soc.lower()}.tflite"


def as_file(entry: dict, target: dict) -> dict:
    """The cell's catalog entry with the NPU file in place of the GPU file (what a pull downloads and checks)."""
    return {**entry, "file": target["file"], "sha256": target["sha256"], "bytes": target["bytes"]}


def sidecar_part(entry: dict, target: dict | None, gpu_file: str) -> dict:
    """What a sidecar adds: on which accelerator the file runs, and for an NPU file its chip, what the farm measured
    on the HTP simulator, what the app needs at run time, and the GPU file to fall back on."""
    if target is None:
        return {"accelerator": "gpu"}
    npu = entry["npu"]
    arch = target["htp_arch"] or "unknown"
    return {"accelerator": "npu", "npu": {
        "soc": target["soc"], "product": target["product"], "htp_arch": arch, "qairt": npu["qairt"],
        "compiler": npu["compiler"], "ops_on_npu": target["ops_on_npu"], "ops_total": target["ops_total"],
        "simulator": target.get("simulator"),
        "runtime": RUNTIME.format(qairt=npu["qairt"], arch=arch, v=arch.upper()),
        "fallback": {"file": gpu_file, "sha256": entry["sha256"],
                     "why": "a phone whose chip has no NPU file, or whose NPU runtime is missing, runs the GPU file"}}}


def targeting_config(socs: list[str]) -> str:
    """device_targeting_configuration.xml: one device group per chip, named as LiteRT names its targets."""
    groups = [_GROUP.format(name=f"Qualcomm_{soc}",
                            selectors="\n".join(_SELECTOR.format(maker=m, soc=soc) for m in _MAKERS))
              for soc in socs]
    return _TARGETING.format(groups="\n".join(groups))


def ai_pack_layout(pack: str, socs: list[str]) -> dict[str, str | None]:
    """Relative path -> chip (None: the GPU file, for every other device) of each model file in an AI pack."""
    assets = f"{pack}/src/main/assets"
    layout = {f"{assets}/model#group_Qualcomm_{soc}/{AI_PACK_MODEL}.tflite": soc for soc in socs}
    layout[f"{assets}/model#group_other/{AI_PACK_MODEL}.tflite"] = None
    return layout


def ai_pack_gradle(pack: str) -> str:
    """The AI pack module's build file (Android Gradle plugin's com.android.ai-pack)."""
    return ('plugins {\n    id("com.android.ai-pack")\n}\n\n'
            f'aiPack {{\n    packName = "{pack}"\n    dynamicDelivery {{\n        deliveryType = "on-demand"\n    }}\n}}\n')


def ai_pack_name(catalog: dict, entry: dict) -> str:
    """A Gradle module name for the pack: letters, digits and '_'."""
    raw = f"{catalog['name']}_{entry['cell']}"
    return "".join(c if c.isalnum() else "_" for c in raw)


def phone_chips(entry: dict) -> list[str]:
    return [soc for soc in compiled_for(entry) if soc not in NOT_PHONES]


def describe_pack(root: Path, pack: str, socs: list[str]) -> str:
    return (f"AI pack {pack} in {root}: {', '.join(socs)} on their NPUs, every other device the GPU file "
            f"(model#group_other); device_targeting_configuration.xml targets each chip")

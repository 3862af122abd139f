"""The adapter set-up: what it would run on each system, and what it says without root."""

import os
import subprocess
import sys

import pytest

from da3_litert_farm.gpu.gpu_setup import install_script, os_release
from tests.conftest import SWIFTSHADER_ICD


def test_debian_12_gets_mesa_from_bookworm_backports():
    script = install_script({"ID": "debian", "VERSION_CODENAME": "bookworm"})
    assert "bookworm-backports main" in script and script.endswith("mesa-vulkan-drivers -t bookworm-backports")
    assert "grep -rqs bookworm-backports" in script  # the suite is added once, not on every run


def test_ubuntu_and_newer_debian_take_their_own_mesa():
    for release in ({"ID": "ubuntu", "ID_LIKE": "debian"}, {"ID": "debian", "VERSION_CODENAME": "trixie"},
                    {"ID": "linuxmint", "ID_LIKE": "ubuntu debian"}):
        script = install_script(release)
        assert script == "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q mesa-vulkan-drivers"


def test_other_systems_get_no_guess():
    assert install_script({"ID": "fedora"}) is None and install_script({}) is None


def test_this_machine_is_ready():
    """`make test` ran the set-up first: the accelerator must be usable here."""
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.gpu.gpu_setup", "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "LiteRT GPU accelerator ready on" in proc.stdout and proc.stdout.rstrip().endswith("computing in FP16")


@pytest.mark.skipif(install_script(os_release()) is None, reason="set-up knows only Debian and Ubuntu")
def test_without_an_adapter_it_prints_the_command_and_fails():
    env = {**os.environ, "VK_ICD_FILENAMES": "/nonexistent.json", "VK_DRIVER_FILES": "/nonexistent.json"}
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.gpu.gpu_setup", "--check"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 1
    assert "WebGPU found no adapter" in proc.stderr
    assert "sudo sh -c" in proc.stderr and "mesa-vulkan-drivers" in proc.stderr


@pytest.mark.skipif(not SWIFTSHADER_ICD.exists(), reason=f"no SwiftShader here ({SWIFTSHADER_ICD}): `make browser`")
def test_an_adapter_that_computes_in_fp32_only_is_refused_without_installing_anything():
    env = {**os.environ, "VK_ICD_FILENAMES": str(SWIFTSHADER_ICD)}
    proc = subprocess.run([sys.executable, "-m", "da3_litert_farm.gpu.gpu_setup"], capture_output=True, text=True, env=env)
    assert proc.returncode == 1
    assert "runs on SwiftShader Device" in proc.stderr and "computes in FP32 only" in proc.stderr
    assert "validation.gpu: skip" in proc.stderr and "installed" not in proc.stdout + proc.stderr

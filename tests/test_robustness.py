"""Fragile spots mended (issue 20): each test reproduces the failure the old code had."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import tempfile
import time
from pathlib import Path

import httpx2
import huggingface_hub
import pytest
from huggingface_hub.errors import LocalEntryNotFoundError
from huggingface_hub.utils import hf_raise_for_status
from torch import nn

from da3_litert_farm.core import peak_memory, system_packages
from da3_litert_farm.gpu import host_lock
from da3_litert_farm.model import checkpoint
from da3_litert_farm.model.official import CheckpointError, load_hub_weights, save_hub_weights
from da3_litert_farm.report import report_check

GOOD_PNG = b"\x89PNG\r\n\x1a\n last good screenshot"


class FailingScreenshotDriver:
    """A page that passes every check, in a browser whose screenshot fails as selenium reports it."""

    def __init__(self, aspects: list[str]):
        self.state = {"ready": "complete", "images": [{"src": "a.png", "complete": True, "width": 640}],
                      "models": aspects, "letterbox": aspects, "warning": None, "height": 1200}

    def get(self, url):
        pass

    def execute_script(self, script):
        return self.state if script == report_check.PAGE_STATE else True

    def get_log(self, kind):
        return []

    def set_window_size(self, width, height):
        pass

    def save_screenshot(self, filename):
        return False  # selenium's answer when the driver's PNG cannot be written; no file is made

    def quit(self):
        pass


def test_a_failed_screenshot_keeps_the_last_good_one_and_is_reported(tmp_path, monkeypatch):
    page = tmp_path / "index.html"
    page.write_text("<html></html>")
    screenshot = tmp_path / "screenshot.png"
    screenshot.write_bytes(GOOD_PNG)
    monkeypatch.setattr(report_check, "find_browser", lambda: report_check.Browser("chromium", "chromedriver"))
    monkeypatch.setattr(report_check, "open_browser", lambda browser, profile: FailingScreenshotDriver(["small-896-16x9"]))
    catalog = {"models": [{"cell": "small-896-16x9"}]}

    problems, _ = report_check.check_report(page, catalog, screenshot)

    assert screenshot.read_bytes() == GOOD_PNG
    assert problems == [f"the browser could not take the screenshot; {screenshot} is left as it was"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["index.html", "screenshot.png"]  # no temp file left


OTHER_UID = 65534  # nobody


def _as_other_user() -> None:
    os.setgroups([])
    os.setgid(OTHER_UID)
    os.setuid(OTHER_UID)


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="switching to another user needs root")


@needs_root
def test_every_user_of_the_machine_takes_the_same_host_lock():
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            _as_other_user()
            os.write(write, str(importlib.reload(host_lock).LOCK_FILE).encode())  # the path as that user derives it
        finally:
            os._exit(0)
    os.close(write)
    other = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    assert other == str(host_lock.LOCK_FILE) == "/tmp/da3_litert_farm.host.lock"


@needs_root
def test_another_user_waits_for_a_gpu_check_started_by_root(monkeypatch):
    # A sticky, world-writable folder, as /tmp is; not the real lock, which a build may hold now.
    folder = Path(tempfile.mkdtemp(prefix="host-lock-", dir="/tmp"))
    try:
        folder.chmod(0o1777)
        monkeypatch.setattr(host_lock, "LOCK_FILE", folder / "host.lock")
        go_read, go_write = os.pipe()
        pid = os.fork()  # before root takes the lock: a child forked inside would share root's hold
        if pid == 0:
            try:
                signal.alarm(30)  # never hang the suite
                _as_other_user()
                os.read(go_read, 1)  # root holds the lock now
                with host_lock.shared():
                    os._exit(0)
            finally:
                os._exit(1)
        with host_lock.alone():  # root makes the lock file
            os.write(go_write, b"x")
            time.sleep(1.0)
            assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # the other user still waits for root's exclusive hold
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0  # and then takes it
    finally:
        shutil.rmtree(folder)


def test_ru_maxrss_is_kilobytes_on_linux_and_bytes_on_macos():
    assert peak_memory.maxrss_to_mib(2_097_152, "linux") == 2048.0  # 2 GiB as Linux reports it, in KiB
    assert peak_memory.maxrss_to_mib(2_147_483_648, "darwin") == 2048.0  # the same 2 GiB on macOS, in bytes
    assert peak_memory.maxrss_to_mib(524_288, "freebsd14") == 512.0


def _proc_kib(path: str, key: str) -> int:
    line = next(line for line in Path(path).read_text().splitlines() if line.startswith(key + ":"))
    return int(line.split()[1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the kernel's own figures in /proc")
def test_peak_rss_is_in_mib_here():
    high_water = _proc_kib("/proc/self/status", "VmHWM") / 1024  # read first: the peak only grows
    peak = peak_memory.peak_rss_mib()
    # Not below the kernel's high-water mark for this process (less 1 MiB: getrusage reads the
    # per-thread RSS counters before they are folded in), not above the machine's memory. It may
    # well be above the high-water mark: ru_maxrss carries over a parent's peak across exec.
    assert high_water - 1 <= peak <= _proc_kib("/proc/meminfo", "MemTotal") / 1024


@pytest.mark.parametrize("script", ["echo fetching; sleep 60",
                                    "trap '' TERM; echo fetching; sleep 60"])  # one that ignores SIGTERM
def test_an_install_that_hangs_is_stopped_at_its_timeout(script, capsys, monkeypatch):
    monkeypatch.setattr(system_packages, "STOP_GRACE_S", 1)
    started = time.monotonic()
    assert system_packages.run_install("gpu_setup", "mesa-vulkan-drivers", script, timeout_s=1) is False
    # Well before the 60 s sleep ends: it is stopped with the shell (it holds the output pipe open).
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert err.startswith("gpu_setup: installing mesa-vulkan-drivers did not finish in 1 s and was stopped")
    assert err.rstrip().endswith("fetching")


REPO = "depth-anything/DA3-SMALL"


def _hub_reply(status: int, error_code: str) -> Exception:
    """The exception huggingface_hub makes of the Hub's reply (status and X-Error-Code header)."""
    url = f"https://huggingface.co/{REPO}/resolve/v9.9/config.json"
    try:
        hf_raise_for_status(httpx2.Response(status, headers={"X-Error-Code": error_code},
                                            request=httpx2.Request("GET", url)))
    except Exception as exc:  # noqa: BLE001 - the test wants whichever class huggingface_hub picks
        return exc
    raise AssertionError("hf_raise_for_status accepted an error reply")


def _download_fails_with(monkeypatch, error: BaseException) -> None:
    """Nothing cached, the Hub reachable, and the download raising `error`."""
    def hf_hub_download(repo, filename, revision, cache_dir, local_files_only):
        if local_files_only:
            raise LocalEntryNotFoundError(f"{filename} is not in the cache")
        raise error

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(checkpoint, "_require_hub_reachable", lambda repo, revision, key: None)


@pytest.mark.parametrize("status, code, message", [
    (404, "RevisionNotFound", f"models.base.revision 'v9.9': revision not found in {REPO} on the Hub"),
    (403, "GatedRepo", f"{REPO} is gated: accept its terms"),
    (401, "RepoNotFound", f"models.base.repo '{REPO}': repository not found on the Hub, or private"),
])
def test_a_hub_refusal_says_what_it_refused_not_offline(monkeypatch, status, code, message):
    _download_fails_with(monkeypatch, _hub_reply(status, code))
    with pytest.raises(CheckpointError) as err:
        checkpoint.fetch_from_hub(REPO, "v9.9", key="models.base")  # the errors name the model's settings
    assert str(err.value).startswith(message)
    assert "hf download" not in str(err.value)  # not the offline help: the network is fine


def test_a_network_failure_during_the_download_gets_the_offline_help(monkeypatch):
    _download_fails_with(monkeypatch, httpx2.ReadTimeout("The read operation timed out"))
    with pytest.raises(CheckpointError, match=r"cannot be downloaded: download failed: The read operation timed out"):
        checkpoint.fetch_from_hub(REPO, "v9.9")


def test_a_bug_in_the_download_is_not_called_offline(monkeypatch):
    _download_fails_with(monkeypatch, TypeError("hf_hub_download() got an unexpected keyword argument 'x'"))
    with pytest.raises(TypeError, match="unexpected keyword argument 'x'"):
        checkpoint.fetch_from_hub(REPO, "v9.9")


def test_a_truncated_weights_file_is_called_cut_short(tmp_path):
    weights = tmp_path / "model.safetensors"
    save_hub_weights(nn.Linear(4, 4), weights)  # 20 float32 = 80 bytes of tensor data
    weights.write_bytes(weights.read_bytes()[:-20])  # an interrupted download
    with pytest.raises(CheckpointError, match=r"model.safetensors: not a readable safetensors file: its header "
                                              r"lists 80 bytes of tensor data but 60 follow it: cut short"):
        load_hub_weights(nn.Linear(4, 4), weights)


def test_a_text_file_is_not_safetensors(tmp_path):
    weights = tmp_path / "model.safetensors"
    weights.write_text("version https://git-lfs.github.com/spec/v1\n")  # a Git LFS pointer, say
    with pytest.raises(CheckpointError, match=r"its first 8 bytes give a header of \d+ bytes but 35 follow: "
                                              r"not a safetensors file"):
        load_hub_weights(nn.Linear(4, 4), weights)


def test_a_missing_weights_file_is_not_called_corrupt(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file or directory"):
        load_hub_weights(nn.Linear(4, 4), tmp_path / "model.safetensors")

"""SIGTERM with requests in flight, on a real process: in-flight requests inside the grace period are answered,
new connections are refused, and the process exits within the grace period; the CLI's own usage errors."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
import orjson
from server_helpers import client_ssl, pod_review

from gpuclaim.double import tls as selfsigned

HERE = Path(__file__).parent


async def test_sigterm_finishes_in_flight_requests_and_exits_within_the_grace_period(
        tls_files: selfsigned.TlsFiles) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(HERE), os.environ.get("PYTHONPATH"))))}
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "slow_server.py"), str(tls_files.cert_path), str(tls_files.key_path), "2.0",
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert process.stdout is not None
    try:
        url = (await asyncio.wait_for(process.stdout.readline(), 20)).decode().strip()
        assert url.startswith("https://127.0.0.1:")
        connector = aiohttp.TCPConnector(ssl=client_ssl(tls_files), force_close=False)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def post(name: str) -> int | str:
                try:
                    async with session.post(url + "/mutate", data=orjson.dumps(pod_review(name=name)),
                                            headers={"Content-Type": "application/json"}) as response:
                        body = orjson.loads(await response.read())
                        return response.status if body["response"]["allowed"] else "denied"
                except aiohttp.ClientError as exc:
                    return type(exc).__name__

            quick = asyncio.create_task(post("slow-1-a"))
            stuck = asyncio.create_task(post("slow-30-b"))
            await asyncio.sleep(0.4)  # both are in the handler now
            sent_at = time.monotonic()
            process.send_signal(signal.SIGTERM)
            await asyncio.sleep(0.2)
            late = await post("after-sigterm")
            assert await quick == 200  # finished inside the grace period
            assert isinstance(await stuck, str)  # cut at the end of the grace period, no answer
            assert late != 200  # no new requests once stopping
        assert await asyncio.wait_for(process.wait(), 10) == 0
        assert time.monotonic() - sent_at < 2.0 + 1.5
        assert (await process.stdout.read()).decode().strip() == "exited"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


def _gpuclaim(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuclaim", "webhook", *args], capture_output=True, text=True,
                          timeout=timeout, env={k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"})


def test_the_command_refuses_to_start_without_a_certificate() -> None:
    result = _gpuclaim("--listen", "127.0.0.1:0")
    assert result.returncode == 2
    assert "--tls-cert and --tls-key" in result.stderr and "Traceback" not in result.stderr


def test_the_command_names_a_bad_flag(tls_files: selfsigned.TlsFiles) -> None:
    result = _gpuclaim("--listen", "nowhere", "--tls-cert", str(tls_files.cert_path),
                       "--tls-key", str(tls_files.key_path))
    assert result.returncode == 2 and "--listen: must be HOST:PORT" in result.stderr


def test_the_command_names_an_unusable_certificate(tls_files: selfsigned.TlsFiles, tmp_path: Path) -> None:
    bad = tmp_path / "bad.crt"
    bad.write_text("not a certificate")
    result = _gpuclaim("--tls-cert", str(bad), "--tls-key", str(tls_files.key_path))
    assert result.returncode == 2 and "--tls-cert/--tls-key: no usable certificate pair" in result.stderr


def test_the_command_reports_a_bad_config_file_with_its_key_path(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("webhook:\n  maxBodyBytes: -1\n")
    result = _gpuclaim("--config", str(config))
    assert result.returncode == 2 and "webhook.maxBodyBytes: must be greater than zero" in result.stderr


def test_the_command_serves_until_sigterm_and_exits_0(tls_files: selfsigned.TlsFiles) -> None:
    with subprocess.Popen(
        [sys.executable, "-m", "gpuclaim", "webhook", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
         "--tls-cert", str(tls_files.cert_path), "--tls-key", str(tls_files.key_path)],
        stderr=subprocess.PIPE, text=True) as process:
        assert process.stderr is not None
        try:
            for line in process.stderr:
                if '"msg":"serving"' in line:
                    assert orjson.loads(line)["urls"][0].startswith("https://127.0.0.1:")
                    break
            process.send_signal(signal.SIGTERM)
            assert process.wait(10) == 0
            assert '"msg":"stopped"' in process.stderr.read()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()

"""Start `streamtrain keda serve` as a real process and wait for the address it prints."""

import subprocess
import threading
import time

from streamtrain.process import stop_child
from tests.integration.cli_process import SCRIPT


class ScalerProcess:
    """A running `streamtrain keda serve`; ``address`` is HOST:PORT of its gRPC port."""

    def __init__(self, bootstrap, *args, timeout_s=60.0):
        self.process = subprocess.Popen(
            [
                SCRIPT,
                "keda",
                "serve",
                "--bootstrap",
                bootstrap,
                "--port",
                "0",
                "--metrics-port",
                "0",
                "--connect-timeout-s",
                "5",
                *args,
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        self._readers = [
            threading.Thread(target=self._read, args=(s, lines), daemon=True)
            for s, lines in ((self.process.stdout, self.stdout), (self.process.stderr, self.stderr))
        ]
        for reader in self._readers:
            reader.start()
        self.address = ""
        deadline = time.monotonic() + timeout_s
        while not self.address and time.monotonic() < deadline and self.process.poll() is None:
            for line in list(self.stdout):
                if line.startswith("STREAMTRAIN_KEDA_ADDRESS="):
                    self.address = line.strip().split("=", 1)[1]
            time.sleep(0.05)
        if not self.address:
            self.stop()
            raise RuntimeError(f"`keda serve` did not start: {self.log()}")

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.append(line)

    @property
    def metrics_url(self):
        for line in self.stderr:
            if "metrics at http" in line:
                return line.rsplit("metrics at ", 1)[1].strip()
        return None

    def log(self):
        return "".join(self.stderr)[-4000:]

    def stop(self, timeout_s=20.0):
        """SIGTERM (exit 130 when it stopped cleanly), SIGKILL if it does not."""
        stop_child(self.process, "streamtrain keda serve", timeout_s)
        for reader in self._readers:
            reader.join(timeout=5)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return self.process.returncode

"""A headless Chromium driven over the DevTools protocol, with the standard library only.

`browser_path()` finds Debian's chromium (or another Chromium/Chrome on PATH); `Browser` starts it
with a private profile, connects to its page over a WebSocket (the protocol's transport; the tiny
client below speaks just enough of RFC 6455: masked text frames out, text/continuation/ping/close
frames in) and offers what the tests need: open a file, evaluate JavaScript, click at a point with
real mouse events, take a screenshot, and the console errors and uncaught exceptions seen so far.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def browser_path() -> str | None:
    """The first Chromium-family browser on PATH, or None."""
    return next((found for found in map(shutil.which, BROWSERS) if found), None)


class _WebSocket:
    """A WebSocket client connection (text messages only)."""

    def __init__(self, url: str, timeout: float):
        assert url.startswith("ws://"), url
        host_port, _, path = url[len("ws://"):].partition("/")
        host, _, port = host_port.partition(":")
        self.socket = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET /{path} HTTP/1.1\r\nHost: {host_port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.socket.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.socket.recv(4096)
            if not chunk:
                raise ConnectionError("the browser closed the connection during the handshake")
            response += chunk
        header, _, self.buffer = response.partition(b"\r\n\r\n")
        if b" 101 " not in header.split(b"\r\n")[0]:
            raise ConnectionError(f"WebSocket handshake refused: {header[:200]!r}")

    def _exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            chunk = self.socket.recv(1 << 20)
            if not chunk:
                raise ConnectionError("the browser closed the connection")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def send(self, text: str) -> None:
        payload = text.encode()
        mask = os.urandom(4)
        length = len(payload)
        if length < 126:
            header = struct.pack("!BB", 0x81, 0x80 | length)
        elif length < 1 << 16:
            header = struct.pack("!BBH", 0x81, 0x80 | 126, length)
        else:
            header = struct.pack("!BBQ", 0x81, 0x80 | 127, length)
        masked = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
        self.socket.sendall(header + mask + masked)

    def receive(self) -> str:
        message = b""
        while True:
            first, second = self._exactly(2)
            opcode, length = first & 0x0F, second & 0x7F
            if length == 126:
                (length,) = struct.unpack("!H", self._exactly(2))
            elif length == 127:
                (length,) = struct.unpack("!Q", self._exactly(8))
            mask = self._exactly(4) if second & 0x80 else None
            payload = self._exactly(length)
            if mask:
                payload = bytes(byte ^ mask[index % 4] for index, byte in enumerate(payload))
            if opcode == 0x8:
                raise ConnectionError("the browser closed the WebSocket")
            if opcode == 0x9:  # ping: answered by the browser's own rules, nothing to do for a short session
                continue
            message += payload
            if first & 0x80:  # the final fragment
                return message.decode()

    def close(self) -> None:
        self.socket.close()


class Browser:
    """A headless Chromium with one page, driven over the DevTools protocol."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900, timeout: float = 30.0):
        self.timeout = timeout
        self.profile = tempfile.mkdtemp(prefix="formal-rope-browser-")
        self.process = subprocess.Popen(
            [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
             "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self.events: list[dict] = []
        self.next_id = 0
        try:
            port = self._port()
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout) as response:
                targets = json.load(response)
            page = next(target for target in targets if target.get("type") == "page")
            self.socket = _WebSocket(page["webSocketDebuggerUrl"], timeout)
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)
        except BaseException:
            self.close()
            raise

    def _port(self) -> int:
        """The port the browser listens on (it writes DevToolsActivePort into its profile when ready)."""
        marker = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                return int(marker.read_text().split()[0])
            if self.process.poll() is not None:
                raise RuntimeError(f"the browser exited with status {self.process.returncode}")
            time.sleep(0.05)
        raise TimeoutError("the browser did not open its DevTools port")

    def call(self, method: str, **params) -> dict:
        """Send one command and return its result (events that arrive meanwhile are kept in `events`)."""
        self.next_id += 1
        identifier = self.next_id
        self.socket.send(json.dumps({"id": identifier, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.receive())
            if message.get("id") == identifier:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str) -> dict:
        """The next event named `method` (one already received counts once)."""
        for index, event in enumerate(self.events):
            if event["method"] == method:
                return self.events.pop(index)
        while True:
            message = json.loads(self.socket.receive())
            if message.get("method") == method:
                return message
            if "method" in message:
                self.events.append(message)

    def open(self, path: Path) -> None:
        """Load a file and wait for its load event."""
        self.call("Page.navigate", url=path.resolve().as_uri())
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (JSON-serialisable values)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click (press and release) at the centre of the first element matching `selector`,
        scrolled into view first."""
        box = self.evaluate(
            f"(function(){{var e=document.querySelector({json.dumps(selector)});e.scrollIntoView({{block:'center'}});"
            "var r=e.getBoundingClientRect();return [r.left+r.width/2, r.top+r.height/2];})()"
        )
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1], button="left", clickCount=1)

    def type_text(self, selector: str, text: str) -> None:
        """Focus an input and type `text` into it as keyboard input."""
        self.evaluate(f"document.querySelector({json.dumps(selector)}).focus()")
        self.call("Input.insertText", text=text)

    def screenshot(self, path: Path, *, full_page: bool = False, scale: float = 1.0) -> Path:
        """A PNG of the viewport (or the whole page), optionally scaled down."""
        width, height = self.evaluate(
            "[document.documentElement.clientWidth, "
            + ("document.documentElement.scrollHeight]" if full_page else "window.innerHeight]")
        )
        self.evaluate("window.scrollTo(0, 0)")
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=full_page,
                         clip={"x": 0, "y": 0, "width": width, "height": height, "scale": scale})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors seen so far."""
        found = []
        for event in self.events:
            params = event.get("params", {})
            if event["method"] == "Runtime.exceptionThrown":
                found.append(str(params.get("exceptionDetails", {}).get("exception", {}).get("description")))
            elif event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(" ".join(str(arg.get("value", arg.get("description"))) for arg in params.get("args", [])))
            elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                found.append(str(params["entry"].get("text")))
        return found

    def close(self) -> None:
        socket_ = getattr(self, "socket", None)
        if socket_ is not None:
            socket_.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

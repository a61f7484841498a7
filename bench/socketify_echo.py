"""Echo server on socketify (uWebSockets' engine, Python handlers; PyPI, needs apt's libuv1),
the peer of scripts/bench-server for idle memory and echo CPU per message.

    python bench/socketify_echo.py PORT

No compression, no idle timeout (uWS's default would close idle clients after 120 s), the
largest message 16 MiB; every message goes back as it came (one frame, same opcode)."""
import sys

from socketify import App, CompressOptions

app = App()
app.ws("/*", {
    "compression": CompressOptions.DISABLED,
    "max_payload_length": 16 * 1024 * 1024,
    "idle_timeout": 0,
    "message": lambda ws, message, opcode: ws.send(message, opcode),
})
# 127.0.0.1, not uWS's 0.0.0.0: a wildcard bind fails while a load generator's source
# address (127.0.0.x) holds the same port number, even in TIME_WAIT.
app.listen({"port": int(sys.argv[1]), "host": "127.0.0.1"}, lambda config: None)
app.run()

"""Echo server on picows (Cython WebSocket over asyncio; PyPI), a peer of scripts/bench-server
for echo CPU per message and idle memory.

    python bench/picows_echo.py PORT

No compression (picows has none), no automatic pings; every data frame goes back as it
came (the load generator sends whole messages as single frames)."""
import asyncio
import sys

from picows import WSListener, WSMsgType, ws_create_server


class Echo(WSListener):
    def on_ws_frame(self, transport, frame):
        if frame.msg_type == WSMsgType.CLOSE:
            transport.send_close(frame.get_close_code(), frame.get_close_message())
            transport.disconnect()
        elif frame.msg_type in (WSMsgType.TEXT, WSMsgType.BINARY, WSMsgType.CONTINUATION):
            transport.send(frame.msg_type, frame.get_payload_as_memoryview(), frame.fin)


async def main(port):
    server = await ws_create_server(lambda request: Echo(), "127.0.0.1", port, backlog=4096)
    await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))

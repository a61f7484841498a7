// Echo server with the Node `ws` library (Debian node-ws), for scripts/bench-server.
const { WebSocketServer } = require('/usr/share/nodejs/ws');
const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, perMessageDeflate: false });
wss.on('listening', () => console.log(`PORT ${wss.address().port}`));
wss.on('connection', (ws) => ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary })));

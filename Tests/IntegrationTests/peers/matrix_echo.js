// The combination matrix's echo server (MatrixTests) in Node `ws` with perMessageDeflate:
// true (its documented switch; threshold and windows at ws's defaults): every message back
// with its type. After each connection: `CLOSED <path> code=<code> messages=<n> bytes=<b>`.
//     node matrix_echo.js PORT|unix:PATH [CERT KEY]     (PORT 0: any free; prints PORT n)
const { WebSocketServer } = require('ws');
const fs = require('fs');
const [where, cert, key] = process.argv.slice(2);
const server = cert
  ? require('https').createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) })
  : require('http').createServer();
const wss = new WebSocketServer({ server, perMessageDeflate: true });
wss.on('connection', (socket, request) => {
  let messages = 0, bytes = 0;
  socket.on('message', (data, binary) => { messages++; bytes += data.length; socket.send(data, { binary }); });
  socket.on('close', (code) => console.log(`CLOSED ${request.url} code=${code === 1005 ? 'none' : code} messages=${messages} bytes=${bytes}`));
});
const announce = () => console.log('PORT ' + (where.startsWith('unix:') ? 0 : server.address().port));
if (where.startsWith('unix:')) server.listen(where.slice(5), announce);
else server.listen(Number(where), '127.0.0.1', announce);
process.on('SIGTERM', () => { for (const c of wss.clients) c.close(1001); server.close(); setTimeout(() => process.exit(0), 100); });

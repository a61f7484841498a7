// The engine's memory per idle connection, for scripts/bench-idle: listens on 127.0.0.1
// (any free port, printed as "PORT n"), turns every accepted TCP connection into a
// server-role ConnectionDriver (no opening handshake: this measures the driver, its
// buffers and its registrations), and on each line read from stdin prints
// "connections N rss_kib R". Not part of wspipe.
import Glibc
import WebSocketCore
import WebSocketEngine
import WebSocketTransport

final class Quiet: ConnectionDelegate {
    var ended = 0
    func connection(_ connection: ConnectionDriver, didStartMessage kind: MessageKind) {}
    func connection(_ connection: ConnectionDriver, didReceive bytes: UnsafeMutableRawPointer, count: Int, in buffer: ByteBuffer) {}
    func connectionDidEndMessage(_ connection: ConnectionDriver) {}
    func connection(_ connection: ConnectionDriver, didEnd ending: ConnectionEnding) { ended += 1 }
}

func residentKiB() -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return -1 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, 256, file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix("VmRSS:") { return Int(text.split(separator: " ")[1]) ?? -1 }
    }
    return -1
}

func say(_ text: String) {
    let bytes = Array((text + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
}

let loop = try EventLoop()
let socket = try TCPListener(address: "127.0.0.1", port: 0)
var drivers: [ConnectionDriver] = []
let delegate = Quiet()
let listener = Listener(loop: loop, socket: socket) { stream in
    let driver = ConnectionDriver(loop: loop, stream: stream, agreement: HandshakeAgreement(role: .server),
                                  maximumMessageSize: 64 << 20, delegate: delegate)
    drivers.append(driver)
    driver.start()
}
listener.start()
say("PORT \(socket.port)")
let input = loop.watch(0) { _ in
    var byte: UInt8 = 0
    if read(0, &byte, 1) <= 0 { loop.stop(); return }
    if byte == 0x0A { say("connections \(drivers.count - delegate.ended) rss_kib \(residentKiB())") }
}
loop.setInterest(input, .readable)
loop.run()

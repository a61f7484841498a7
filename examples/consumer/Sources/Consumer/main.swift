// The consumer check's program: WSKit's server echoes; WSKit's client and WSKitFoundation's
// WebSocketTask each send a text and a binary message, get both back and close. It names
// every type of WSKit's public API from a lower module (re-exported by WSKit).
// Prints one line per step; exits 1 with the failing step on stderr.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking  // URLRequest on Linux
#endif
import WSKit
import WSKitFoundation

struct Failed: Error, CustomStringConvertible {
    let description: String
}

func expect(_ condition: Bool, _ what: String) throws {
    guard condition else { throw Failed(description: what) }
}

func run() async throws {
    // Every type WSKit's public API names, written as a user writes it: one that WSKit
    // does not re-export from the module it lives in fails this build.
    let address: ListenAddress = .tcp(address: "127.0.0.1", port: 0)
    var options = WebSocketOptions()
    let family: AddressFamily = .ipv4
    options.addressFamily = family
    let minimum: TLSVersion = .tls12
    options.tls.minimumVersion = minimum

    let server = try await WebSocketServer.bind(to: address)
    let echo = Task {
        await withTaskGroup(of: Void.self) { group in
            for await pending in server {
                group.addTask {
                    guard let ws = try? await pending.accept() else { return }
                    do { for try await message in ws.messages { try await ws.send(message) } } catch {}
                }
            }
        }
    }
    let url = "ws://\(server.localAddress)/"
    print("server: \(url)")

    // WSKit: async/await.
    let parsed: WebSocketURL = try WebSocketURL(parsing: url)
    let ws = try await WebSocket.connect(to: parsed, options: options)
    try await ws.send(.text("hello"))
    try await ws.send(.binary([0, 1, 2, 255]))
    var received: [Message] = []
    for try await message in ws.messages {
        received.append(message)
        if received.count == 2 { break }
    }
    try expect(received == [.text("hello"), .binary([0, 1, 2, 255])], "WSKit echoes: \(received)")
    try await ws.close(code: 1000, reason: "done")
    try expect(ws.closeCode == 1000, "WSKit close code: \(ws.closeCode.map(String.init) ?? "none")")
    print("WSKit: text and binary echoed, closed with 1000")

    // WSKitFoundation: URLSessionWebSocketTask's shape.
    guard let taskURL = URL(string: url) else { throw Failed(description: "URL(\(url))") }
    let task = WebSocketTask(with: URLRequest(url: taskURL))
    task.resume()
    try await task.send(.string("hi"))
    try await task.send(.data(Data([9, 8, 7])))
    let first = try await task.receive()
    let second = try await task.receive()
    try expect(first == .string("hi") && second == .data(Data([9, 8, 7])), "WebSocketTask echoes: \(first), \(second)")
    task.cancel(with: .normalClosure, reason: nil)
    print("WSKitFoundation: text and binary echoed, cancelled")

    await server.close()
    await echo.value
    print("consumer: ok")
}

do {
    try await run()
} catch {
    FileHandle.standardError.write(Data("consumer: \(error)\n".utf8))
    exit(1)
}

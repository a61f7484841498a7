// Echo chat: each line typed goes to the server as a text message; every message received
// is printed. End of input (Ctrl-D) closes with 1000 and waits for the server's Close.
//
//   swift run echo-chat ws://127.0.0.1:8766/      (examples/servers/echo_server.py)
import Glibc
import WSKit

@main
struct EchoChat {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 2 else {
            print("usage: echo-chat ws://HOST:PORT/PATH")
            exit(2)
        }
        do {
            let ws = try await WebSocket.connect(to: arguments[1])
            // The printer: whole messages, in order, until the server's Close.
            let printer = Task {
                for try await message in ws.messages {
                    switch message {
                    case .text(let text): print("< \(text)")
                    case .binary(let bytes): print("< [\(bytes.count) bytes]")
                    }
                }
            }
            // readLine blocks: it runs on its own thread, not on the cooperative pool.
            for await line in StandardInputLines() {
                try await ws.send(.text(line))
            }
            try await ws.close(code: 1000, reason: "bye")
            try await printer.value
            print("closed: \(ws.closeCode.map(String.init) ?? "no code") \(ws.closeReason ?? "")")
        } catch {
            print("echo-chat: \(error)")
            exit(1)
        }
    }
}

/// Lines of standard input, read on a dedicated thread.
struct StandardInputLines: AsyncSequence {
    typealias Element = String
    func makeAsyncIterator() -> AsyncStream<String>.Iterator {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingOldest(64))
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(continuation)).toOpaque()
        pthread_create(&thread, nil, { raw in
            guard let raw else { return nil }
            let box = Unmanaged<Box>.fromOpaque(raw).takeRetainedValue()
            while let line = readLine() { box.continuation.yield(line) }
            box.continuation.finish()
            return nil
        }, box)
        pthread_detach(thread)
        return stream.makeAsyncIterator()
    }

    final class Box: Sendable {
        let continuation: AsyncStream<String>.Continuation
        init(_ continuation: AsyncStream<String>.Continuation) { self.continuation = continuation }
    }
}

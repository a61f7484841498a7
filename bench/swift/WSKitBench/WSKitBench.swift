// scripts/bench-api's Swift program: messages through WSKit's `messages` and `send`.
//
//   wskit-bench receive URL               counts messages until the server's Close
//   wskit-bench send URL COUNT SIZE text|binary
//
// Prints one line: "messages N bytes B seconds S mallocs M" (M: heap allocations during
// the run, all threads, when bench/malloccount.so is preloaded; else -1).
import Glibc
import WSKit

@main
struct WSKitBench {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count >= 3 else {
            print("usage: wskit-bench receive URL | send URL COUNT SIZE text|binary")
            exit(2)
        }
        do {
            var options = WebSocketOptions()
            options.maximumMessageSize = 1 << 30
            options.keepsBuffersWhenIdle = true
            let ws = try await WebSocket.connect(to: arguments[2], options: options)
            let clock = ContinuousClock()
            var messages = 0, bytes = 0
            let startAllocations = mallocCount()
            let start = clock.now
            switch arguments[1] {
            case "receive":
                for try await message in ws.messages {
                    messages += 1
                    switch message {
                    case .text(let text): bytes += text.utf8.count
                    case .binary(let payload): bytes += payload.count
                    }
                }
            case "send":
                guard arguments.count == 6, let count = Int(arguments[3]), let size = Int(arguments[4]) else { exit(2) }
                let text = String(repeating: "x", count: size)
                let binary = [UInt8](repeating: 0x5A, count: size)
                let isText = arguments[5] == "text"
                for _ in 0..<count {
                    try await ws.send(isText ? .text(text) : .binary(binary))
                }
                messages = count
                bytes = count * size
                try await ws.close()
            default:
                exit(2)
            }
            let elapsed = clock.now - start
            let allocations = startAllocations < 0 ? -1 : mallocCount() - startAllocations
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            print("messages \(messages) bytes \(bytes) seconds \(seconds) mallocs \(allocations)")
        } catch {
            print("wskit-bench: \(error)")
            exit(1)
        }
    }

    /// Heap allocations so far, from bench/malloccount.c when it is preloaded.
    static func mallocCount() -> Int {
        // RTLD_DEFAULT (a null handle): search every loaded object.
        guard let symbol = dlsym(nil, "malloccount_total") else { return -1 }
        typealias Counter = @convention(c) () -> UInt64
        return Int(unsafeBitCast(symbol, to: Counter.self)())
    }
}

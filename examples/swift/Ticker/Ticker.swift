// Ticker consumer: subscribes to a JSON feed, prints each message, and pings the server
// every few seconds (printing the round trip) until the feed ends with the server's Close.
//
//   swift run ticker ws://127.0.0.1:8765/ [ping-seconds]   (examples/servers/feed_server.py)
import Glibc
import WSKit

@main
struct Ticker {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2 else {
            print("usage: ticker ws://HOST:PORT/PATH [ping-seconds]")
            exit(2)
        }
        let interval = arguments.count > 2 ? Double(arguments[2]) ?? 5 : 5
        do {
            var options = WebSocketOptions(subprotocols: [])
            options.pingInterval = .seconds(25)    // keepalive, as the iOS articles do
            let ws = try await WebSocket.connect(to: arguments[1], options: options)
            try await ws.send(.text(#"{"op":"subscribe","ch":"ticker"}"#))
            let pinger = Task {
                while !Task.isCancelled {
                    let rtt = try await ws.ping()
                    print("ping: \(rtt)")
                    try await Task.sleep(for: .seconds(interval))
                }
            }
            var count = 0
            for try await message in ws.messages {
                if case .text(let text) = message {
                    count += 1
                    print(text)
                }
            }
            pinger.cancel()
            print("feed ended after \(count) messages: \(ws.closeCode.map(String.init) ?? "no code") \(ws.closeReason ?? "")")
        } catch {
            print("ticker: \(error)")
            exit(1)
        }
    }
}

// Ticker consumer: subscribes to a JSON feed and prints each message, staying connected
// through server restarts (WebSocket.reconnecting: backoff, the subscription sent again
// after every handshake), and pings the server every few seconds (printing the round
// trip) until the feed ends with the server's Close.
//
//   swift run ticker ws://127.0.0.1:8765/ [ping-seconds]   (examples/servers/feed_server.py)
import Glibc
import WSKit

/// One line on stdout, flushed (a pipe's reader sees it now).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

@main
struct Ticker {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2 else {
            say("usage: ticker ws://HOST:PORT/PATH [ping-seconds]")
            exit(2)
        }
        let interval = arguments.count > 2 ? Double(arguments[2]) ?? 5 : 5
        do {
            var options = WebSocketOptions()
            options.pingInterval = .seconds(25)    // keepalive
            let policy = ReconnectPolicy(maxRetries: 10, resubscribe: [.text(#"{"op":"subscribe","ch":"ticker"}"#)])
            let feed = try WebSocket.reconnecting(to: arguments[1], options: options, policy: policy)
            var pinger: Task<Void, Never>?
            var count = 0
            for try await event in feed {
                switch event {
                case .connected(let connection):
                    say("connected (attempt \(connection.attempt))")
                    pinger?.cancel()
                    pinger = Task {
                        while !Task.isCancelled, let ws = feed.current {
                            guard let rtt = try? await ws.ping() else { return }
                            say("ping: \(rtt)")
                            try? await Task.sleep(for: .seconds(interval))
                        }
                    }
                case .message(.text(let text)):
                    count += 1
                    say(text)
                case .message:
                    break
                case .disconnected(let error, let retryIn?):
                    pinger?.cancel()
                    say("disconnected: \(error); retrying in \(retryIn)")
                case .disconnected(.closed(let code, let reason), nil):
                    pinger?.cancel()
                    say("feed ended after \(count) messages: \(code.map(String.init) ?? "no code") \(reason)")
                case .disconnected(let error, nil):
                    say("ticker: \(error)")
                    exit(1)
                case .dropped:
                    break
                }
            }
        } catch {
            say("ticker: \(error)")
            exit(1)
        }
    }
}

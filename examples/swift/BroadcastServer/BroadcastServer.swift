// Broadcast server: every text or binary message a client sends goes to every connected
// client (the sender too). Serves until its standard input ends (Ctrl-D), then closes
// every client with 1001 "going away" and exits.
//
//   swift run broadcast-server 127.0.0.1:8080 [/path]     prints "listening on ws://ADDR:PORT/"
//   wspipe ws://127.0.0.1:8080/                            (in two terminals: type in one, read in both)
import Dispatch
import Glibc
import WSKit

/// The connected clients; each one's sends are serialized by the actor.
actor Hub {
    private var clients: [Int: WebSocket] = [:]
    private var nextID = 0

    func join(_ socket: WebSocket) -> Int {
        nextID += 1
        clients[nextID] = socket
        return nextID
    }

    func leave(_ id: Int) { clients[id] = nil }

    /// Hands `message` to every client; a client whose connection is gone is skipped.
    func broadcast(_ message: Message) async {
        for (id, client) in clients {
            do { try await client.send(message) } catch { clients[id] = nil }
        }
    }
}

@main
struct BroadcastServer {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count >= 2 else {
            print("usage: broadcast-server [ADDR:]PORT [PATH]")
            exit(2)
        }
        let server: WebSocketServer
        do {
            var options = WebSocketServerOptions(maximumClients: 1000)
            options.path = arguments.count > 2 ? arguments[2] : nil   // other paths: 404
            options.pingInterval = .seconds(30)
            server = try await WebSocketServer.bind(to: arguments[1], options: options)
        } catch {
            print("broadcast-server: \(error)")
            exit(1)
        }
        print("listening on ws://\(server.localAddress)/")
        fflush(nil)

        // Standard input's end stops the server (the blocking read on a Dispatch thread,
        // not one of the few threads Swift's tasks run on).
        DispatchQueue.global().async {
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            Task { await server.close() }
        }
        let hub = Hub()
        await withTaskGroup(of: Void.self) { group in
            for await pending in server {
                // The request is there before accepting: a handler could check a token here.
                let remote = pending.request.remoteAddress
                group.addTask {
                    guard let ws = try? await pending.accept() else { return }
                    let id = await hub.join(ws)
                    print("client \(id) joined from \(remote)")
                    fflush(nil)
                    do {
                        for try await message in ws.messages { await hub.broadcast(message) }
                    } catch {
                        print("client \(id): \(error)")
                    }
                    await hub.leave(id)
                    print("client \(id) left: \(ws.closeCode.map(String.init) ?? "no close code")")
                    fflush(nil)
                }
            }
        }
        print("closed")
    }
}

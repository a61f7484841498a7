// Callback echoes through WSKitFoundation's WebSocketTask (the URLSessionWebSocketTask
// shape): COUNT text messages of SIZE bytes sent with completion handlers from one thread,
// read back by a recursive receive(completionHandler:), against `wsbench echo`.
//
//   wskit-task-bench URL COUNT SIZE
//
// Prints one line: "echoes N seconds S per-second R".
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WSKitFoundation

let arguments = CommandLine.arguments
guard arguments.count == 4, let url = URL(string: arguments[1]), let count = Int(arguments[2]), let size = Int(arguments[3]) else {
    print("usage: wskit-task-bench URL COUNT SIZE")
    exit(2)
}
let task = WebSocketTask(with: url)
let done = DispatchSemaphore(value: 0)
final class Tally: @unchecked Sendable {
    var received = 0
    var failure: (any Error)?
}
let tally = Tally()  // touched only by the receive handlers, which run one at a time
@Sendable func listen() {
    task.receive { result in
        switch result {
        case .success:
            tally.received += 1
            if tally.received == count { done.signal() } else { listen() }
        case .failure(let error):
            tally.failure = error
            done.signal()
        }
    }
}
task.resume()
let payload = String(repeating: "x", count: size)
let start = Date()
listen()
for _ in 0..<count { task.send(.string(payload)) { error in if let error { print("send failed: \(error)") } } }
done.wait()
let seconds = Date().timeIntervalSince(start)
if let failure = tally.failure {
    print("failed after \(tally.received): \(failure)")
    exit(1)
}
print("echoes \(count) seconds \(String(format: "%.3f", seconds)) per-second \(Int(Double(count) / seconds))")
task.cancel(with: .normalClosure, reason: nil)
Thread.sleep(forTimeInterval: 0.2)

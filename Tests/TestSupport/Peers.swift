// The Python peer servers (Tests/IntegrationTests/peers) as the tests see them: a running
// peer and what it recorded about each connection.
import Foundation

/// A record with the request headers as [name, value] pairs (the peers write them so).
package protocol HeaderRecord {
    var headers: [[String]] { get }
}

extension HeaderRecord {
    /// Values of the headers named `name` (any case), in order.
    package func values(_ name: String) -> [String] {
        headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
    }
}

/// What record.py and raw.py wrote about one connection.
package struct ConnectionRecord: Decodable, HeaderRecord {
    package struct Message: Decodable, Equatable {
        package let type: String
        package let data: String

        package init(type: String, data: String) {
            self.type = type
            self.data = data
        }

        package var bytes: [UInt8] { Array(Data(base64Encoded: data) ?? Data()) }
        package var text: String { String(decoding: bytes, as: UTF8.self) }
    }

    package struct Close: Decodable, Equatable {
        package let code: Int
        package let reason: String

        package init(code: Int, reason: String) {
            self.code = code
            self.reason = reason
        }
    }

    package let path: String?
    package let headers: [[String]]
    package let subprotocol: String?
    package let messages: [Message]
    package let pings: [String]
    /// Pongs received (raw.py only).
    package let pongs: [String]?
    package let close: Close?
    package let client_started_close: Bool?

    package var texts: [String] { messages.map(\.text) }
    package var pingPayloads: [String] { pings.map { String(decoding: Data(base64Encoded: $0) ?? Data(), as: UTF8.self) } }
    package var pongPayloads: [String] { (pongs ?? []).map { String(decoding: Data(base64Encoded: $0) ?? Data(), as: UTF8.self) } }
}

/// A running peer server: a Python script from peers/ (or websocat).
package final class Peer {
    package let process: ChildProcess
    package let port: Int
    package let recordFile: String?

    package init(process: ChildProcess, port: Int, recordFile: String?) {
        self.process = process
        self.port = port
        self.recordFile = recordFile
    }

    /// The record of the `n`th connection (1-based), once the peer has written it.
    package func record(_ n: Int = 1, timeout: Double = 15) throws -> ConnectionRecord {
        try record(n, as: ConnectionRecord.self, timeout: timeout)
    }

    /// The `n`th record (1-based) in the peer's record file, decoded as `type`, once the
    /// peer has announced it with "RECORDED n".
    package func record<T: Decodable>(_ n: Int, as type: T.Type, timeout: Double = 15) throws -> T {
        guard let recordFile else { throw HarnessError("this peer records nothing") }
        guard process.stdout.waitForLine(startingWith: "RECORDED \(n)", timeout: timeout) != nil else {
            throw HarnessError("the peer wrote no record for connection \(n) within \(timeout) s; stderr:\n\(process.stderr.text)")
        }
        let records = try JSONDecoder().decode([T].self, from: Data(contentsOf: URL(fileURLWithPath: recordFile)))
        guard records.count >= n else { throw HarnessError("record file has \(records.count) records, expected \(n)") }
        return records[n - 1]
    }
}

extension Peer {
    /// Starts a peer and waits for its `PORT n` line (on stdout, or on stderr with
    /// `portFromStderr`); a peer that announces no port within `timeout` is killed.
    package static func launch(executable: String, arguments: [String], environment: [String: String],
                               stdin: StandardInput = .null, recordFile: String? = nil, portLine: String = "PORT ",
                               portFromStderr: Bool = false, timeout: Double = 20) throws -> Peer {
        let process = try ChildProcess(executable: executable, arguments: arguments, environment: environment, stdin: stdin)
        let stream = portFromStderr ? process.stderr : process.stdout
        guard let announcement = stream.waitForLine(startingWith: portLine, timeout: timeout) else {
            let result = process.wait(timeout: 0.1)
            throw HarnessError("peer \(arguments.first ?? executable) did not start: \(result)")
        }
        let digits = announcement.dropFirst(portLine.count).prefix { $0.isNumber }
        guard let port = Int(digits) else {
            process.kill()
            throw HarnessError("bad port announcement '\(announcement)'")
        }
        return Peer(process: process, port: port, recordFile: recordFile)
    }
}

extension Peer {
    /// peers/slow_reader.py: a server with a 16 KiB receive buffer that leaves the client's
    /// frames in the kernel until the file `go` exists.
    package static func slowReader(go: String) throws -> Peer {
        try launch(executable: Locations.python,
                   arguments: ["\(Locations.peers)/slow_reader.py", "--port", "0", "--go", go, "--rcvbuf", "16384"],
                   environment: Locations.baseEnvironment)
    }
}

// Helpers for the network-reach tests: proxy and SOCKS5 peers and their records, secrets
// checks. (Client certificates: TestSupport's ClientTLSMaterial.)
import Foundation
import XCTest
import TestSupport

/// What peers/proxy.py recorded about one CONNECT.
struct ProxyRecord: Decodable, HeaderRecord {
    let request_line: String
    let method: String
    let target: String
    let headers: [[String]]
    /// The Proxy-Authorization credentials, decoded ("user:pass"), if any.
    let auth: String?
    let status: Int?
}

/// What peers/socks5.py recorded about one connection.
struct SocksRecord: Decodable {
    let methods: [Int]?
    let method: Int?
    let user: String?
    let password: String?
    /// "ipv4", "ipv6" or "domain".
    let atyp: String?
    let host: String?
    let port: Int?
    let reply: Int?
}

extension Peer {
    /// How many records the peer has announced so far.
    var recordCount: Int {
        process.stdout.text.split(separator: "\n").filter { $0.hasPrefix("RECORDED ") }.count
    }
}

extension IntegrationTestCase {
    /// peers/proxy.py: an HTTP CONNECT proxy.
    func startProxy(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("proxy-\(UUID().uuidString).json")
        return try startPython("proxy.py", ["--record", record] + arguments, recordFile: record, file: file, line: line)
    }

    /// peers/socks5.py: a SOCKS5 server.
    func startSocks(_ arguments: [String] = [], file: StaticString = #filePath, line: UInt = #line) throws -> Peer {
        let record = path("socks-\(UUID().uuidString).json")
        return try startPython("socks5.py", ["--record", record] + arguments, recordFile: record, file: file, line: line)
    }

    /// echo.py on a Unix socket in the test's directory.
    func startUnixEcho(_ arguments: [String] = [], name: String = "echo.sock") throws -> (Peer, String) {
        // sockaddr_un holds 107 bytes: keep the path short (the test directory may be long).
        let socket = "/tmp/wspipe-\(getpid())-\(UUID().uuidString.prefix(8)).sock"
        let peer = try startPeer(executable: Locations.python,
                                 arguments: ["\(Locations.peers)/echo.py", "--unix", socket] + arguments)
        addTeardownBlock { unlink(socket) }
        return (peer, socket)
    }

    /// Fails the test if any of `secrets` (or its Basic-auth base64 form with `user`)
    /// appears on stdout or stderr.
    func assertNoSecrets(_ result: RunResult, _ secrets: [String], file: StaticString = #filePath, line: UInt = #line) {
        for secret in secrets where !secret.isEmpty {
            XCTAssertFalse(result.stderr.contains(secret), "stderr shows \(secret): \(result.stderr)", file: file, line: line)
            XCTAssertFalse(result.stdoutText.contains(secret), "stdout shows \(secret)", file: file, line: line)
        }
    }
}

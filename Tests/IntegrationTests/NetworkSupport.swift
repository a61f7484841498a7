// Helpers for the network-reach tests: proxy and SOCKS5 peers and their records, client
// certificates signed by the run's test CA, secrets checks.
import Foundation
import XCTest

/// What peers/proxy.py recorded about one CONNECT.
struct ProxyRecord: Decodable {
    let request_line: String
    let method: String
    let target: String
    let headers: [[String]]
    /// The Proxy-Authorization credentials, decoded ("user:pass"), if any.
    let auth: String?
    let status: Int?

    func values(_ name: String) -> [String] {
        headers.filter { $0[0].lowercased() == name.lowercased() }.map { $0[1] }
    }
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

/// A client certificate (CN "wspipe-test-client") signed by the run's test CA, its key in
/// clear and encrypted with `passphrase`, and a certificate from another CA, made once per
/// run with the openssl CLI in the TLSMaterial directory.
final class ClientTLSMaterial: Sendable {
    static let passphrase = "kp-S3cret-phrase"
    let server: TLSMaterial
    var cert: String { server.directory + "/client.pem" }
    var key: String { server.directory + "/client.key" }
    var encryptedKey: String { server.directory + "/client-enc.key" }
    /// Signed by a CA the server does not trust.
    var strangerCert: String { server.directory + "/stranger.pem" }
    var strangerKey: String { server.directory + "/stranger.key" }

    private init(server: TLSMaterial) { self.server = server }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: Result<ClientTLSMaterial, HarnessError>?

    static func shared() throws -> ClientTLSMaterial {
        lock.lock()
        defer { lock.unlock() }
        if let cached { return try cached.get() }
        let result: Result<ClientTLSMaterial, HarnessError>
        do {
            result = .success(try generate(TLSMaterial.shared()))
        } catch let error as HarnessError {
            result = .failure(error)
        } catch {
            result = .failure(HarnessError("\(error)"))
        }
        cached = result
        return try result.get()
    }

    private static func generate(_ server: TLSMaterial) throws -> ClientTLSMaterial {
        let directory = server.directory
        func openssl(_ arguments: [String]) throws {
            let child = try ChildProcess(executable: "/usr/bin/openssl", arguments: arguments,
                                         environment: Locations.baseEnvironment.merging(["HOME": directory]) { $1 })
            let result = child.wait(timeout: 30)
            guard result.exitCode == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")) failed: \(result)") }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature\n"
            .write(toFile: directory + "/client.ext", atomically: false, encoding: .utf8)
        try openssl(["req"] + ec + ["-keyout", directory + "/client.key", "-out", directory + "/client.csr",
                                     "-subj", "/CN=wspipe-test-client"])
        try openssl(["x509", "-req", "-in", directory + "/client.csr", "-CA", directory + "/ca.pem",
                     "-CAkey", directory + "/ca.key", "-CAcreateserial", "-days", "2",
                     "-extfile", directory + "/client.ext", "-out", directory + "/client.pem"])
        try openssl(["pkey", "-in", directory + "/client.key", "-aes256", "-passout", "pass:\(passphrase)",
                     "-out", directory + "/client-enc.key"])
        // A self-signed client certificate: from a CA the server does not know.
        try openssl(["req", "-x509"] + ec + ["-keyout", directory + "/stranger.key", "-out", directory + "/stranger.pem",
                                               "-days", "2", "-subj", "/CN=stranger"])
        return ClientTLSMaterial(server: server)
    }
}

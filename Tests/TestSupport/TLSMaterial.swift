// TLS material made at run time with the openssl CLI: a test CA, server certificates
// and client certificates. Nothing secret is ever committed.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A CA, a server certificate for localhost/127.0.0.1/::1 signed by it, and one for
/// another name (other.example), made once per test run with the openssl CLI in a
/// temporary directory (removed at exit). Nothing secret is ever committed.
package final class TLSMaterial: Sendable {
    package let directory: String
    package var caCert: String { directory + "/ca.pem" }
    package var serverCert: String { directory + "/server.pem" }
    package var serverKey: String { directory + "/server.key" }
    package var otherCert: String { directory + "/other.pem" }
    package var otherKey: String { directory + "/other.key" }

    private init(directory: String) { self.directory = directory }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: Result<TLSMaterial, HarnessError>?
    nonisolated(unsafe) private static var directoryToRemove: String?

    package static func shared() throws -> TLSMaterial {
        lock.lock()
        defer { lock.unlock() }
        if let cached { return try cached.get() }
        let result: Result<TLSMaterial, HarnessError>
        do {
            result = .success(try generate())
        } catch let error as HarnessError {
            result = .failure(error)
        } catch {
            result = .failure(HarnessError("\(error)"))
        }
        cached = result
        return try result.get()
    }

    private static func generate() throws -> TLSMaterial {
        let directory = NSTemporaryDirectory() + "wspipe-it-tls-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        directoryToRemove = directory
        atexit {
            if let directory = TLSMaterial.directoryToRemove { try? FileManager.default.removeItem(atPath: directory) }
        }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        func openssl(_ arguments: [String]) throws {
            let child = try ChildProcess(executable: "/usr/bin/openssl", arguments: arguments,
                                         environment: Locations.baseEnvironment.merging(["HOME": directory]) { $1 })
            let result = child.wait(timeout: 30)
            guard result.exitCode == 0 else { throw HarnessError("openssl \(arguments.joined(separator: " ")) failed: \(result)") }
        }
        func write(_ name: String, _ text: String) throws {
            try text.write(toFile: directory + "/" + name, atomically: false, encoding: .utf8)
        }
        try openssl(["req", "-x509"] + ec + ["-keyout", directory + "/ca.key", "-out", directory + "/ca.pem", "-days", "2",
                     "-subj", "/CN=wspipe integration test CA",
                     "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        for (name, names) in [("server", "DNS:localhost,IP:127.0.0.1,IP:::1"), ("other", "DNS:other.example")] {
            try write(name + ".ext", """
                subjectAltName=\(names)
                basicConstraints=CA:FALSE
                keyUsage=critical,digitalSignature
                extendedKeyUsage=serverAuth

                """)
            try openssl(["req"] + ec + ["-keyout", "\(directory)/\(name).key", "-out", "\(directory)/\(name).csr",
                                         "-subj", "/CN=\(name == "server" ? "localhost" : "other.example")"])
            try openssl(["x509", "-req", "-in", "\(directory)/\(name).csr", "-CA", directory + "/ca.pem",
                         "-CAkey", directory + "/ca.key", "-CAcreateserial", "-days", "2",
                         "-extfile", "\(directory)/\(name).ext", "-out", "\(directory)/\(name).pem"])
        }
        return TLSMaterial(directory: directory)
    }
}

/// A client certificate (CN "wspipe-test-client") signed by the run's test CA, its key in
/// clear and encrypted with `passphrase`, and a certificate from another CA, made once per
/// run with the openssl CLI in the TLSMaterial directory.
package final class ClientTLSMaterial: Sendable {
    package static let passphrase = "kp-S3cret-phrase"
    package let server: TLSMaterial
    package var cert: String { server.directory + "/client.pem" }
    package var key: String { server.directory + "/client.key" }
    package var encryptedKey: String { server.directory + "/client-enc.key" }
    /// Signed by a CA the server does not trust.
    package var strangerCert: String { server.directory + "/stranger.pem" }
    package var strangerKey: String { server.directory + "/stranger.key" }

    private init(server: TLSMaterial) { self.server = server }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var cached: Result<ClientTLSMaterial, HarnessError>?

    package static func shared() throws -> ClientTLSMaterial {
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

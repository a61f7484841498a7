// Where things are (the package root, the .venv peers, the binary under test) and the
// error the helpers throw.
import Foundation
#if canImport(Glibc)
import Glibc
#endif

package enum Locations {
    /// The package root: three levels above this file (Tests/TestSupport/Locations.swift).
    package static let packageRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The venv python that scripts/setup makes (with `websockets`).
    package static var python: String { packageRoot + "/.venv/bin/python" }
    package static var websocat: String { packageRoot + "/.venv/bin/websocat" }
    package static var peers: String { packageRoot + "/Tests/IntegrationTests/peers" }

    /// $WSPIPE_BIN, else `wspipe` next to the running test bundle (.build/debug/wspipe).
    package static let wspipe: String = {
        if let path = ProcessInfo.processInfo.environment["WSPIPE_BIN"], !path.isEmpty { return path }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
        return ((executable as NSString).deletingLastPathComponent as NSString).appendingPathComponent("wspipe")
    }()

    /// A small fixed environment: nothing inherited (no WSPIPE_BEARER, SSL_CERT_FILE, ...).
    package static let baseEnvironment = ["PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"]
}

package struct HarnessError: Error, CustomStringConvertible {
    package let description: String
    package init(_ description: String) { self.description = description }
}

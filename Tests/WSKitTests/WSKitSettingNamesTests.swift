import Glibc
import XCTest
import TestSupport
import WebSocketCore
import WebSocketTransport
@testable import WSKit

/// The dialer's route reasons and log lines worded with WSKit's setting names (the
/// transport words them; the CLI gives its option names, the library its own).
final class WSKitSettingNamesTests: XCTestCase {
    private func route(_ options: WebSocketOptions, _ url: String) throws -> String {
        "\(try Dialer.route(for: try WebSocketURL(parsing: url), options: try options.dialOptions(), names: .library))"
    }

    func testRouteReasonsNameTheLibrarysSettings() throws {
        var options = WebSocketOptions()
        options.proxy = .none
        XCTAssertEqual(try route(options, "ws://h.example:8080/"), "direct to h.example:8080 (WebSocketOptions.proxy = .none)")
        options.proxy = .url("http://p.example:3128")
        XCTAssertEqual(try route(options, "ws://h.example:8080/"),
                       "via HTTP proxy p.example:3128 (from WebSocketOptions.proxy) to h.example:8080")
        options.noProxy = "h.example"
        XCTAssertEqual(try route(options, "ws://h.example:8080/"), "direct to h.example:8080 (WebSocketOptions.noProxy matches h.example)")
    }

    func testConnectToAndAnUnverifiedCertificateAreNamedAsTheLibraryNamesThem() throws {
        let tls = try TLSMaterial.shared()
        let peer = try Peer.launch(executable: Locations.python,
                                   arguments: ["\(Locations.peers)/echo.py", "--port", "0", "--tls", tls.serverCert, tls.serverKey],
                                   environment: Locations.baseEnvironment)
        defer { peer.process.kill() }
        var options = WebSocketOptions()
        options.proxy = .none
        options.connectTo = (host: "127.0.0.1", port: UInt16(peer.port))
        options.tls.verifiesPeer = false
        var lines: [String] = []
        let stream = try Dialer.connect(to: try WebSocketURL(parsing: "wss://service.invalid/"), options: try options.dialOptions(),
                                        deadline: Deadline(seconds: 10), names: .library, log: { lines.append($0) })
        stream.close()
        XCTAssertTrue(lines.contains("route: direct to 127.0.0.1:\(peer.port) (WebSocketOptions.proxy = .none)"), "\(lines)")
        XCTAssertTrue(lines.contains("WebSocketOptions.connectTo: dialing 127.0.0.1:\(peer.port) instead of service.invalid:443; "
                                     + "Host, SNI and certificate name stay service.invalid"), "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("TLS established: ") && $0.hasSuffix(" (certificate not verified: tls.verifiesPeer = false)") },
                      "\(lines)")
        XCTAssertFalse(lines.contains { $0.contains("--") }, "no CLI option named: \(lines)")
    }
}

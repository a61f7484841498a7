// --trust-proxy, --proxy-protocol and --client-address-header as the parser reads them.
import XCTest
import WebSocketEngine
@testable import WSPipeCLI

final class ClientAddressOptionsTests: XCTestCase {
    private func policy(_ arguments: [String]) throws -> ClientAddressPolicy {
        guard case .run(let config) = try CommandLineParser.parse(["-l", "0", "--echo"] + arguments),
              let serve = config.serve else { throw UsageError("not a server run") }
        return serve.server.clientAddress
    }

    private func usageError(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineParser.parse(["-l", "0", "--echo"] + arguments)
            return nil
        } catch {
            return error.message
        }
    }

    func testTheFlagsSetThePolicy() throws {
        XCTAssertEqual(try policy([]), ClientAddressPolicy(), "nothing trusted, no PROXY header, X-Forwarded-For")
        let set = try policy(["--trust-proxy", "10.0.0.0/8", "--trust-proxy", "::1", "--trust-proxy", "unix",
                              "--proxy-protocol", "--client-address-header", "forwarded"])
        XCTAssertEqual(set.trusted.map(\.description), ["10.0.0.0/8", "::1/128", "unix"])
        XCTAssertTrue(set.proxyProtocol)
        XCTAssertEqual(set.header, .forwarded)
    }

    func testMistakes() {
        XCTAssertEqual(usageError(["--trust-proxy", "10.0.0/8"]),
                       "--trust-proxy '10.0.0/8' is not an address range (192.0.2.0/24, 2001:db8::/32, an address, or unix)")
        XCTAssertEqual(usageError(["--client-address-header", "X-Real-IP", "--trust-proxy", "::1"]),
                       "--client-address-header 'X-Real-IP' is not X-Forwarded-For or Forwarded")
        XCTAssertEqual(usageError(["--client-address-header", "Forwarded"]),
                       "--client-address-header needs --trust-proxy: the header is read only from those proxies")
        XCTAssertEqual(usageError(["--trust-proxy"]).map { $0.contains("--trust-proxy") }, true)
    }
}

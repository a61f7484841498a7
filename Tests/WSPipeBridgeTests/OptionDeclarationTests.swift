// Each option declares its --help category and where it applies (Option.category,
// Option.scope): --help's layout, the scope lists and the server modes' refusals come from
// those declarations, and `wspipe --help` fits one 80x40 screen.
import Foundation
import XCTest
import TestSupport
@testable import WSPipeBridge
@testable import WSPipeCLI

final class OptionDeclarationTests: XCTestCase {
    private func lines(_ text: String) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    private func message(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineParser.parse(arguments)
            return nil
        } catch {
            return report(.usage(error.message, pointsAtHelp: error.pointsAtHelp, topic: error.helpCategory?.rawValue)).message
        }
    }

    private func topic(_ arguments: [String]) throws -> HelpTopic? {
        guard case .help(let topic) = try CommandLineParser.parse(arguments) else { return nil }
        return topic
    }

    // MARK: - Categories

    func testEveryOptionIsInExactlyOneCategoryAndHelpAllListsThemAll() {
        for option in Option.allCases {
            let holding = Option.Category.allCases.filter { $0.options.contains(option) }
            XCTAssertEqual(holding.count, 1, "\(option.longName) is in \(holding.map(\.rawValue))")
        }
        XCTAssertEqual(Option.Category.allCases.flatMap(\.options).count, Option.allCases.count)
        for category in Option.Category.allCases {
            XCTAssertFalse(category.options.isEmpty, "the category \(category.rawValue) has no option")
            let section = helpSection(category)
            XCTAssertTrue(helpText.contains(section), "--help all lacks the \(category.rawValue) section")
            for option in category.options {
                XCTAssertTrue(section.contains(" \(option.longName)"), "--help \(category.rawValue) lacks \(option.longName)")
                XCTAssertTrue(HelpTopic.category(category).text.contains(" \(option.longName)"))
            }
        }
    }

    /// Every `static let NAME = Option(...)` (or one of its helpers) in the CLI's sources is
    /// in `Option.allCases`: the registry the parser and --help read.
    func testEveryDeclarationIsRegistered() throws {
        let directory = URL(fileURLWithPath: Locations.packageRoot).appendingPathComponent("Sources/WSPipeCLI")
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }
        let pattern = try NSRegularExpression(pattern: #"static let \w+ = (?:Option|seconds|windowBits|reconnectCount)\(\s*"(--[a-z0-9-]+)""#)
        var declared: [String] = []
        for file in files {
            let text = try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)
            for match in pattern.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
                if let range = Range(match.range(at: 1), in: text) { declared.append(String(text[range])) }
            }
        }
        XCTAssertEqual(declared.count, Option.allCases.count, "declarations: \(declared.count), registered: \(Option.allCases.count)")
        for name in declared { XCTAssertNotNil(Option.named(name), "\(name) is declared but not in Option.allCases") }
    }

    // MARK: - The screens

    func testHelpFitsOneScreenAndEveryHelpLineFits80Columns() {
        let summary = lines(summaryHelpText.hasSuffix("\n") ? String(summaryHelpText.dropLast()) : summaryHelpText)
        XCTAssertLessThanOrEqual(summary.count, 40, "wspipe --help is \(summary.count) lines")
        for topic in [HelpTopic.summary, .all] + Option.Category.allCases.map(HelpTopic.category) {
            for line in lines(topic.text) {
                XCTAssertLessThanOrEqual(line.count, 80, "\(topic): \(line)")
            }
        }
        for category in Option.Category.allCases {
            XCTAssertTrue(summaryHelpText.contains("  \(category.rawValue) "), "wspipe --help does not list \(category.rawValue)")
        }
        XCTAssertTrue(summaryHelpText.hasPrefix("usage: wspipe"))
    }

    func testHelpTakesACategory() throws {
        XCTAssertEqual(try topic(["--help"]), .summary)
        XCTAssertEqual(try topic(["-h"]), .summary)
        XCTAssertEqual(try topic(["--help", "tls"]), .category(.tls))
        XCTAssertEqual(try topic(["-h", "server"]), .category(.server))
        XCTAssertEqual(try topic(["--help=all"]), .all)
        XCTAssertEqual(try topic(["--help", "ALL"]), .all)
        XCTAssertEqual(try topic(["-htls"]), .category(.tls))
        XCTAssertEqual(try topic(["--help", "echo"]), .category(.server), "an option's name: its category")
        XCTAssertEqual(try topic(["-h", "forward-listen"]), .category(.gateway))
        XCTAssertEqual(try topic(["ws://h/", "--help"]), .summary, "URL --help still prints help")
        XCTAssertEqual(try topic(["--help", "ws://h/"]), .summary)
        XCTAssertEqual(try topic(["--help", "-v"]), .summary)
        XCTAssertEqual(try topic(["-vh"]), .summary)
        let categories = Option.Category.allCases.map(\.rawValue).joined(separator: ", ")
        for arguments in [["--help", "foo"], ["-h", "foo"], ["--help=foo"]] {
            XCTAssertEqual(message(arguments), "unknown help category 'foo'; the categories are \(categories), and all")
        }
    }

    func testUsageErrorsPointAtTheCategoryOfTheirOption() {
        XCTAssertEqual(message(["--tls-min", "9", "ws://h/"]), "--tls-min '9' is not a TLS version (1.2 or 1.3; see wspipe --help tls)")
        XCTAssertEqual(message(["--retry-delay", "1", "ws://h/"]), "--retry-delay needs --reconnect (see wspipe --help reconnect)")
        XCTAssertEqual(message(["--tiemout", "3", "ws://h/"]), "unknown option '--tiemout'; did you mean --timeout? (see wspipe --help limits)")
        XCTAssertEqual(message(["-n", "x", "ws://h/"]), "--max-messages 'x' is not a positive number of messages (see wspipe --help limits)")
        XCTAssertEqual(message([]), "no URL given; usage: wspipe [options] ws://host[:port]/path (see wspipe --help)")
        XCTAssertEqual(UsageError("-l ':1' names no address").helpCategory, .server)
        XCTAssertNil(UsageError("more than one URL given: 'a' and 'b'").helpCategory)
    }

    // MARK: - Scopes

    /// The lists the checks use, as they were written by hand before the declarations.
    func testScopeListsAreTheDeclarations() {
        func names(_ options: [Option]) -> Set<String> { Set(options.map(\.longName)) }
        XCTAssertEqual(names(Option.serverOnly), Set(["--listen", "--reuseport", "--echo", "--broadcast", "--bus", "--bus-inbound",
            "--bus-password-file", "--bus-ping", "--path", "--allow-origin", "--sameorigin", "--require-protocol", "--require-bearer",
            "--health", "--metrics", "--metrics-public", "--static", "--staticdir", "--devconsole", "--response-header",
            "--max-clients", "--max-clients-per-ip", "--max-handshakes-per-ip", "--ipv6-prefix", "--rate-limit", "--byte-rate",
            "--rate-limit-action", "--handshake-timeout", "--exec", "--sh", "--dir", "--close-grace", "--max-children", "--passenv",
            "--client-ca", "--forward", "--forward-tokens", "--oneshot", "--trust-proxy", "--proxy-protocol", "--client-address-header"]))
        XCTAssertEqual(names(Option.clientOnly), Set(["--proxy", "--socks5", "--noproxy", "--unix-socket", "--connect-to", "--resolve",
            "--ipv4", "--ipv6", "--location", "--max-redirs", "--insecure", "--cacert", "--sni", "--header", "--origin",
            "--user-agent", "--bearer", "--connect-timeout", "--reconnect", "--reconnect-on-close", "--retry-delay",
            "--retry-max-delay", "--max-retries", "--retry-reset", "--queue-size", "--queue-bytes", "--queue-policy", "--send-file",
            "--stale-timeout", "--print-ping-rtt", "--forward-listen", "--expect", "--expect-json", "--expect-timeout", "--until",
            "--until-json", "--print-match-only"]))
        XCTAssertEqual(names(Option.notYetServing), ["--decompress"])
        XCTAssertEqual(names(Option.reconnecting), Set(["--reconnect", "--reconnect-on-close", "--retry-delay", "--retry-max-delay",
            "--max-retries", "--retry-reset", "--queue-size", "--queue-bytes", "--queue-policy"]))
        XCTAssertEqual(names(Option.notForwarding), Set(["--text", "--binary", "--null", "--jsonl", "--timestamps", "--base64",
            "--whole-input", "--max-messages", "--one-message", "--require-count", "--send", "--timeout", "--idle-timeout",
            "--receive-only", "--send-only", "--stats", "--no-close", "--linger", "--close-code", "--close-reason", "--decompress",
            "--send-file", "--stale-timeout", "--print-ping-rtt", "--interactive", "--no-interactive", "--no-history", "--expect",
            "--expect-json", "--expect-timeout", "--until", "--until-json", "--print-match-only"]))
        XCTAssertEqual(names(ServerModeDescriptor.broadcast.only), ["--bus", "--bus-inbound", "--bus-password-file", "--bus-ping"])
        XCTAssertEqual(names(ServerModeDescriptor.exec.only), ["--close-grace", "--max-children", "--passenv"])
        XCTAssertEqual(names(ServerModeDescriptor.forward.only), ["--close-grace"])
        XCTAssertEqual(names(ServerModeDescriptor.echo.refusals.flatMap(\.options)), Set(["--text", "--binary", "--null",
            "--chunk-size", "--timestamps", "--base64", "--whole-input", "--one-message", "--require-count", "--receive-only",
            "--send-only", "--stats", "--no-close", "--linger", "--close-code", "--close-reason", "--interactive", "--no-interactive", "--no-history"]))
        XCTAssertTrue(ServerModeDescriptor.stdio.refusals.isEmpty)
        // Every option is somewhere: no declaration without a scope.
        for option in Option.allCases { XCTAssertFalse(option.scope.isEmpty, option.longName) }
    }

    /// A scope is what the checks refuse: an option declared for the client alone is refused
    /// with -l, one declared for no --forward-listen is refused there.
    func testScopesDecideTheRefusals() {
        XCTAssertEqual(message(["-l", "0", "--proxy", "http://p:1"]),
                       "--proxy is a client option; it cannot be used with -l/--listen (see wspipe --help network)")
        XCTAssertEqual(message(["--forward-listen", "0", "--stats", "ws://h/"]),
                       "--stats has no meaning with --forward-listen: each TCP connection's bytes are the binary messages of its own "
                       + "WebSocket, with no stdin or stdout (see wspipe --help output)")
        XCTAssertNil(message(["--forward-listen", "0", "--chunk-size", "4K", "ws://h/"]))
    }
}

// The flag x mode table in SERVER ("The stdio mode") of man/wspipe.1 is written by hand;
// these tests read its cells and compare each with `ServerModeDescriptor.accepts`, and
// check the usage errors the descriptors give.
import Foundation
import XCTest
import TestSupport
@testable import WSPipeBridge
@testable import WSPipeCLI

final class ManPageModeTableTests: XCTestCase {
    /// One row of the table: the options it names and its cell per mode column.
    private struct Row {
        let options: [Option]
        let cells: [String]
    }

    /// Each column's modes: one, or several sharing a column ("--echo, --other") when every cell agrees.
    private func table() throws -> (modes: [[ServerModeDescriptor]], rows: [Row]) {
        let path = URL(fileURLWithPath: Locations.packageRoot).appendingPathComponent("man/wspipe.1").path
        let lines = try String(contentsOfFile: path, encoding: .utf8).components(separatedBy: "\n")
        let section = try XCTUnwrap(lines.firstIndex(of: ".SS \"The stdio mode\""), "no 'The stdio mode' in SERVER")
        let start = try XCTUnwrap(lines[section...].firstIndex(of: ".TS"), "no table in 'The stdio mode'")
        let end = try XCTUnwrap(lines[start...].firstIndex(of: ".TE"))
        // tbl: the line ending in "." is the format; a T{ ... T} block is one cell.
        let format = try XCTUnwrap(lines[start..<end].firstIndex { $0.hasSuffix(".") })
        var rows: [[String]] = []
        var current = ""
        var inBlock = false
        for line in lines[(format + 1)..<end] {
            var text = line
            if inBlock {
                guard text.hasPrefix("T}") else { current += " " + text; continue }
                inBlock = false
                text.removeFirst(2)
            }
            current += text
            if current.hasSuffix("T{") {
                current.removeLast(2)
                inBlock = true
            } else {
                rows.append(current.components(separatedBy: "\t").map { Self.plain($0) })
                current = ""
            }
        }
        let header = try XCTUnwrap(rows.first)
        let modes = try header.dropFirst().map { column in
            let named = ServerModeDescriptor.table.filter { mode in
                mode.flags.isEmpty ? column.hasPrefix("stdio") : mode.flags.contains { column.contains($0.longName) }
            }
            return try XCTUnwrap(named.isEmpty ? nil : named, "the column '\(column)' is no mode of ServerModeDescriptor.table")
        }
        let body = try rows.dropFirst().map { cells in
            XCTAssertEqual(cells.count, modes.count + 1, "a row of \(cells.count) cells: \(cells)")
            return Row(options: try Self.options(cells[0]), cells: Array(cells.dropFirst()))
        }
        return (modes, body)
    }

    /// A cell without font escapes, "\-" as "-", "\(em" as "—".
    private static func plain(_ cell: String) -> String {
        cell.replacingOccurrences(of: "\\fB", with: "").replacingOccurrences(of: "\\fR", with: "")
            .replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\(em", with: "—")
            .trimmingCharacters(in: .whitespaces)
    }

    /// The options a cell names ("-t, -b, -0, --chunk-size", "-n N", "--send MSG").
    private static func options(_ cell: String) throws -> [Option] {
        let names = cell.split(whereSeparator: { $0 == " " || $0 == "," || $0 == ":" }).filter { $0.hasPrefix("-") }
        XCTAssertFalse(names.isEmpty, "no option in '\(cell)'")
        return try names.map { name in
            let found = name.hasPrefix("--") ? Option.named(String(name)) : name.count == 2 ? Option.named(short: name.last!) : nil
            return try XCTUnwrap(found, "'\(name)' in the table is not an option")
        }
    }

    /// Whether a cell says the mode takes `option`: "—" refuses; "-b: ...; others —" takes
    /// only the options named before "others —"; any other text is a meaning.
    private static func accepts(_ cell: String, _ option: Option) throws -> Bool {
        if cell == "—" { return false }
        guard let others = cell.range(of: "others —") else { return true }
        return try options(String(cell[..<others.lowerBound])).contains(option)
    }

    func testEveryCellOfTheManPageTableMatchesTheModeDescriptors() throws {
        let (modes, rows) = try table()
        XCTAssertEqual(Set(modes.joined().map(\.name)), Set(ServerModeDescriptor.table.map(\.name)), "a mode without a column")
        for row in rows {
            for (column, cell) in zip(modes, row.cells) {
                for mode in column {
                    for option in row.options {
                        XCTAssertEqual(try Self.accepts(cell, option), mode.accepts(option),
                                       "\(option.longName) with \(mode.name): the man page says '\(cell)'")
                    }
                }
            }
        }
        // Every option some mode refuses has its row.
        let documented = rows.flatMap(\.options)
        for mode in ServerModeDescriptor.table {
            for option in mode.refusals.flatMap(\.options) where !documented.contains(option) {
                XCTFail("\(mode.name) refuses \(option.longName), which has no row in the man page's table")
            }
        }
    }

    func testTheTableReaderSeesRefusals() throws {
        let (modes, rows) = try table()
        let echo = try XCTUnwrap(modes.firstIndex { $0.contains { $0.name == "--echo" } })
        let linger = try XCTUnwrap(rows.first { $0.options == [Option.linger] })
        XCTAssertEqual(linger.cells[echo], "—")
        XCTAssertFalse(try Self.accepts("-b: binary output; others —", Option.null))
        XCTAssertTrue(try Self.accepts("-b: binary output; others —", Option.binary))
    }

    func testModeFlagsAndTheirOwnOptionsAreServerOptions() {
        for mode in ServerModeDescriptor.table {
            for option in mode.flags + mode.only {
                XCTAssertTrue(Option.serverOnly.contains(option), "\(option.longName) (\(mode.name)) is not in Option.serverOnly")
            }
        }
    }

    private func message(_ arguments: [String]) -> String? {
        do {
            _ = try CommandLineParser.parse(arguments)
            return nil
        } catch {
            return error.message
        }
    }

    func testUsageErrorsComeFromTheDescriptors() {
        XCTAssertEqual(message(["-l", "0", "--echo", "-b"]), "--binary has no meaning with --echo: messages go back with their own type")
        XCTAssertEqual(message(["-l", "0", "--echo", "--linger", "1"]),
                       "--linger has no meaning with -l/--listen --echo (see SERVER in the man page)")
        XCTAssertEqual(message(["-l", "0", "--broadcast", "--stats"]),
                       "--stats has no meaning with -l/--listen --broadcast (see SERVER in the man page)")
        XCTAssertEqual(message(["-l", "0", "--sh", "cat", "-0"]),
                       "--null has no meaning with -l/--listen --exec/--sh/--dir (see SERVER in the man page)")
        XCTAssertEqual(message(["-l", "0", "--echo", "--close-grace", "1"]), "--close-grace needs --exec, --sh, --dir, --forward or --forward-tokens")
        XCTAssertEqual(message(["-l", "0", "--forward", "tcp:127.0.0.1:1", "-b"]),
                       "--binary has no meaning with --forward: the client's messages are bytes for the target either way")
        XCTAssertEqual(message(["-l", "0", "--forward", "tcp:127.0.0.1:1", "--forward-tokens", "t"]),
                       "--forward and --forward-tokens cannot be combined: one fixed target, or a table of them")
        XCTAssertNil(message(["-l", "0", "--forward", "127.0.0.1:1"]), "websockify's HOST:PORT is tcp:HOST:PORT")
        XCTAssertEqual(message(["-l", "0", "--forward", "nowhere"]), "--forward 'nowhere' is not [tcp:]HOST:PORT ([IPv6] in brackets) or unix:PATH")
        XCTAssertNil(message(["-l", "0", "--forward", "tcp:127.0.0.1:1", "--close-grace", "2", "--idle-timeout", "5"]))
        XCTAssertEqual(message(["-l", "0", "--echo", "--broadcast"]), "--echo cannot be combined with --broadcast: choose one mode")
        XCTAssertEqual(message(["-l", "0", "--broadcast", "--sh", "cat"]),
                       "--exec/--sh/--dir, --echo and --broadcast are different modes: choose one")
        XCTAssertEqual(message(["-l", "0", "--sh", "cat", "--exec", "cat"]),
                       "--exec and --sh cannot be combined: give one program")
        XCTAssertEqual(message(["-l", "0", "--dir", "/tmp", "--exec", "cat"]),
                       "--dir and --exec cannot be combined: give one program or a directory of them")
        XCTAssertEqual(message(["-l", "0", "--dir", "/tmp", "--sh", "cat"]),
                       "--dir and --sh cannot be combined: give one program or a directory of them")
        XCTAssertNil(message(["-l", "0", "--dir", "/tmp", "--max-children", "2", "--close-grace", "1", "--passenv", "HOME"]))
        XCTAssertNil(message(["-l", "0", "--sh", "cat", "-b"]))
        XCTAssertNil(message(["-l", "0", "--broadcast", "-n", "2", "--no-close"]))
    }
}

// Keeps man/wspipe.1 and `wspipe --help` in step with the code: every option in
// `Option.allCases` must be documented in both (long and short name together), the man
// page may not document options that do not exist, and its EXIT STATUS section must list
// exactly the `ExitStatus` values.
import Foundation
import XCTest
import TestSupport
@testable import WSPipeBridge
@testable import WSPipeCLI
import WebSocketTransport

final class ManPageTests: XCTestCase {
    private static let packageRoot = URL(fileURLWithPath: Locations.packageRoot)

    private static let manPagePath = packageRoot.appendingPathComponent("man/wspipe.1").path

    private func manPageSource() throws -> String {
        do {
            return try String(contentsOfFile: Self.manPagePath, encoding: .utf8)
        } catch {
            XCTFail("cannot read the man page at \(Self.manPagePath): \(error)")
            throw error
        }
    }

    // MARK: - Options

    /// roff escapes are written, not their bytes: a form feed where `\\f` was meant rendered
    /// "timed out afterISECONDSP s".
    func testManPageHoldsNoControlBytes() throws {
        let source = try manPageSource()
        for (number, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let controls = line.unicodeScalars.filter { $0.value < 0x20 && $0 != "\t" || $0.value == 0x7F }
            XCTAssertTrue(controls.isEmpty, "man/wspipe.1:\(number + 1) holds control byte(s) \(controls.map { String($0.value, radix: 16) })")
        }
    }

    func testEveryOptionIsInTheManPageOptionsSection() throws {
        let page = ManPage(source: try manPageSource())
        let headings = page.optionHeadings(inSection: "OPTIONS")
        XCTAssertFalse(headings.isEmpty, "no .TP option headings found in the OPTIONS section")
        for option in Option.allCases {
            let matching = headings.filter { $0.longNames.contains(option.longName) }
            XCTAssertEqual(matching.count, 1,
                           "\(option.longName) should have exactly one heading in OPTIONS of man/wspipe.1, found \(matching.count)")
            guard let heading = matching.first else { continue }
            if let short = option.shortName {
                XCTAssertTrue(heading.shortNames.contains(short),
                              "the man page heading for \(option.longName) lacks its short name -\(short): \(heading.text)")
            } else {
                XCTAssertTrue(heading.shortNames.isEmpty,
                              "the man page heading for \(option.longName) shows a short name it does not have: \(heading.text)")
            }
        }
    }

    /// OPTIONS has a subsection per --help category (Option.category), each option under its own.
    func testEveryOptionIsUnderItsCategorysSubsection() throws {
        let titles: [Option.Category: String] = [
            .modes: "Modes", .formats: "Formats", .limits: "Counts and time limits", .ending: "Ending the session",
            .connection: "Connection", .compression: "Compression", .reconnect: "Staying connected", .conversation: "Conversations",
            .network: "Network",
            .tls: "TLS", .request: "Request", .output: "Output", .server: "Server", .access: "Who may connect (server mode)",
            .web: "Plain HTTP (server mode)", .bus: "A bus between servers (server mode)",
            .programs: "A program per connection (server mode)", .gateway: "Gateway"]
        XCTAssertEqual(titles.count, Option.Category.allCases.count, "a category without its subsection title here")
        let page = ManPage(source: try manPageSource())
        let body = try XCTUnwrap(page.sectionLines("OPTIONS"))
        var subsection = ""
        var found: [String: String] = [:]
        for (index, line) in body.enumerated() {
            if line.hasPrefix(".SS ") {
                subsection = String(line.dropFirst(4)).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            } else if (line == ".TP" || line.hasPrefix(".TP ")) && index + 1 < body.count {
                for name in ManPage.names(in: ManPage.plainText(body[index + 1])).long { found[name] = subsection }
            }
        }
        for option in Option.allCases {
            XCTAssertEqual(found[option.longName], titles[option.category],
                           "\(option.longName) (--help \(option.category.rawValue)) is under another subsection of OPTIONS")
        }
    }

    func testManPageDocumentsNoUnknownOptions() throws {
        let page = ManPage(source: try manPageSource())
        let known = Set(Option.allCases.map(\.longName))
        let knownShort = Set(Option.allCases.compactMap(\.shortName))
        // Every .TP heading of the page, not only those in OPTIONS: a heading that names
        // an option must name a real one.
        for heading in page.optionHeadings(inSection: nil) {
            for name in heading.longNames where !known.contains(name) {
                XCTFail("man/wspipe.1 documents \(name), which is not in Option.allCases (heading: \(heading.text))")
            }
        }
        for heading in page.optionHeadings(inSection: "OPTIONS") {
            for letter in heading.shortNames where !knownShort.contains(letter) {
                XCTFail("man/wspipe.1 documents -\(letter), which is not a short option (heading: \(heading.text))")
            }
        }
    }

    func testEveryOptionIsInTheHelpText() {
        let lines = helpText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for option in Option.allCases {
            // The line that introduces the option: it starts (after indentation) with the
            // short name or the long name.
            let intro = lines.filter { line in
                let trimmed = line.drop { $0 == " " }
                // The left column; a description's wrapped line may start with an option too.
                guard line.count - trimmed.count <= 6 else { return false }
                if let short = option.shortName, trimmed.hasPrefix("-\(short), \(option.longName)") {
                    return ManPage.names(in: String(trimmed)).long.first == option.longName
                }
                return trimmed.hasPrefix(option.longName) && ManPage.names(in: String(trimmed)).long.first == option.longName
            }
            XCTAssertEqual(intro.count, 1, "--help should introduce \(option.longName) on exactly one line, found \(intro.count)")
            if let short = option.shortName, let line = intro.first {
                XCTAssertTrue(line.contains("-\(short), \(option.longName)"),
                              "--help shows \(option.longName) without its short name -\(short): \(line)")
            }
        }
    }

    func testHelpTextMentionsNoUnknownOptions() {
        let known = Set(Option.allCases.map(\.longName))
        for name in ManPage.names(in: helpText).long where !known.contains(name) {
            XCTFail("--help mentions \(name), which is not in Option.allCases")
        }
    }

    // MARK: - Exit statuses

    func testExitStatusSectionListsEveryExitStatus() throws {
        let page = ManPage(source: try manPageSource())
        guard page.sectionLines("EXIT STATUS") != nil else {
            XCTFail("man/wspipe.1 has no EXIT STATUS section")
            return
        }
        let documented = page.exitStatusHeadings()
        let expected = Set(ExitStatus.allCases.map(\.rawValue))
        for status in ExitStatus.allCases where !documented.contains(status.rawValue) {
            XCTFail("EXIT STATUS in man/wspipe.1 does not list \(status.rawValue) (\(status))")
        }
        for value in documented where !expected.contains(value) {
            XCTFail("EXIT STATUS in man/wspipe.1 lists \(value), which is not an ExitStatus")
        }
    }

    func testHelpTextListsEveryExitStatus() {
        guard let start = helpText.range(of: "Exit status:") else {
            XCTFail("--help has no 'Exit status:' part")
            return
        }
        let part = helpText[start.upperBound...]
        let numbers = Set(part.split { !$0.isNumber }.compactMap { Int32($0) })
        for status in ExitStatus.allCases where !numbers.contains(status.rawValue) {
            XCTFail("--help's exit status list lacks \(status.rawValue) (\(status))")
        }
    }

    // MARK: - Small consistency checks

    func testManPageNamesTheCurrentVersion() throws {
        let page = ManPage(source: try manPageSource())
        let header = page.lines.first { $0.hasPrefix(".TH ") }
        XCTAssertNotNil(header, "man/wspipe.1 has no .TH line")
        XCTAssertTrue(header?.contains("wspipe \(wspipeVersion)") ?? false,
                      "the .TH line should name wspipe \(wspipeVersion): \(header ?? "")")
    }

    func testManPageHasTheRequiredSections() throws {
        let page = ManPage(source: try manPageSource())
        for name in ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "MODES", "CLOSING", "NETWORK", "EXIT STATUS",
                     "ENVIRONMENT", "SECURITY", "EXAMPLES", "SEE ALSO"] {
            XCTAssertNotNil(page.sectionLines(name), "man/wspipe.1 has no \(name) section")
        }
        let environment = page.sectionLines("ENVIRONMENT")?.joined(separator: "\n") ?? ""
        for variable in ["WSPIPE_BEARER", "SSL_CERT_FILE", "SSL_CERT_DIR"] + ProxySelection.variableNames {
            XCTAssertTrue(environment.contains(variable), "ENVIRONMENT in man/wspipe.1 does not mention \(variable)")
        }
    }

    /// `man -l` at 80 columns says nothing on stderr: no "cannot adjust line", no "table
    /// wider than line width" (narrow table columns, long unbreakable words).
    func testManPageFormatsAt80ColumnsWithoutWarnings() throws {
        let man = try Tool.man.path()
        _ = try Tool.groff.path()  // man formats with it
        let process = Process()
        process.executableURL = URL(fileURLWithPath: man)
        process.arguments = ["-l", Self.manPagePath]
        process.environment = ["MANWIDTH": "80", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "MANPAGER": "cat", "PAGER": "cat"]
        let stderr = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let warnings = String(decoding: stderr.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, warnings)
        XCTAssertEqual(warnings, "", "MANWIDTH=80 man -l man/wspipe.1 warns")
    }

    // MARK: - The parser itself

    func testParserReadsRoffHeadings() {
        let page = ManPage(source: """
            .SH OPTIONS
            .TP
            \\fB\\-b\\fR, \\fB\\-\\-binary\\fR
            Binary.
            .TP
            .BI \\-\\-chunk\\-size " BYTES"
            Chunks.
            .SH "EXIT STATUS"
            .TP
            .B 0
            Fine.
            .TP
            .B 143
            Terminated.
            .SH ENVIRONMENT
            """)
        let headings = page.optionHeadings(inSection: "OPTIONS")
        XCTAssertEqual(headings.map(\.longNames), [["--binary"], ["--chunk-size"]])
        XCTAssertEqual(headings.map(\.shortNames), [["b"], []])
        XCTAssertEqual(page.exitStatusHeadings(), [0, 143])
    }
}

/// Just enough roff reading for the checks above.
private struct ManPage {
    let lines: [String]

    init(source: String) {
        lines = source.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// The lines of the section named `name` (after `.SH name`, up to the next `.SH`).
    func sectionLines(_ name: String) -> [String]? {
        var result: [String]?
        for line in lines {
            if line.hasPrefix(".SH") {
                if result != nil { break }
                let title = line.dropFirst(3).trimmingCharacters(in: .whitespaces)
                    .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                if title == name { result = [] }
                continue
            }
            result?.append(line)
        }
        return result
    }

    struct Heading {
        /// The heading as plain text ("-b, --binary").
        let text: String
        let longNames: [String]
        let shortNames: [Character]
    }

    /// The tag lines of `.TP` paragraphs in a section (nil: the whole page), as text.
    func optionHeadings(inSection section: String?) -> [Heading] {
        guard let body = section.map({ sectionLines($0) ?? [] }) ?? Optional(lines) else { return [] }
        var headings: [Heading] = []
        var index = 0
        while index < body.count {
            if body[index] == ".TP" || body[index].hasPrefix(".TP "), index + 1 < body.count {
                let text = ManPage.plainText(body[index + 1])
                let names = ManPage.names(in: text)
                headings.append(Heading(text: text, longNames: names.long, shortNames: names.short))
                index += 2
            } else {
                index += 1
            }
        }
        return headings
    }

    /// The numbers that head `.TP` paragraphs in EXIT STATUS.
    func exitStatusHeadings() -> [Int32] {
        guard let body = sectionLines("EXIT STATUS") else { return [] }
        var values: [Int32] = []
        var index = 0
        while index + 1 < body.count {
            if body[index] == ".TP" || body[index].hasPrefix(".TP ") {
                let words = ManPage.plainText(body[index + 1]).split { $0 == " " || $0 == "," }
                values += words.compactMap { Int32($0) }
                index += 2
            } else {
                index += 1
            }
        }
        return values
    }

    /// A roff line as the reader sees it: request name and font escapes removed, `\-` as
    /// `-`, quotes dropped.
    static func plainText(_ line: String) -> String {
        var text = line
        if text.hasPrefix(".") {
            // ".B x", ".BR x y": drop the macro name.
            if let space = text.firstIndex(of: " ") {
                text = String(text[text.index(after: space)...])
            } else {
                text = ""
            }
        }
        text = text.replacingOccurrences(of: #"\\f(\[[^\]]*\]|\(..|.)"#, with: "", options: .regularExpression)
        text = text.replacingOccurrences(of: "\\-", with: "-")
        text = text.replacingOccurrences(of: "\\%", with: "")
        text = text.replacingOccurrences(of: "\\&", with: "")
        text = text.replacingOccurrences(of: "\\(dq", with: "\"")
        text = text.replacingOccurrences(of: "\"", with: "")
        return text
    }

    /// Long (`--name`) and short (`-x`) option names in plain text, in order.
    static func names(in text: String) -> (long: [String], short: [Character]) {
        var long: [String] = []
        var short: [Character] = []
        let characters = Array(text)
        var index = 0
        func isNameCharacter(_ c: Character) -> Bool { c.isASCII && (c.isLetter || c.isNumber || c == "-") }
        while index < characters.count {
            let atWordStart = index == 0 || characters[index - 1] == " " || characters[index - 1] == ","
                || characters[index - 1] == "(" || characters[index - 1] == "\n"
            guard atWordStart, characters[index] == "-" else {
                index += 1
                continue
            }
            var end = index + 1
            while end < characters.count && isNameCharacter(characters[end]) { end += 1 }
            let word = String(characters[index..<end])
            if word.hasPrefix("--"), word.count > 2, let third = word.dropFirst(2).first, third.isLetter {
                long.append(word)
            } else if word.count == 2, let letter = word.last, letter.isLetter || letter.isNumber {
                short.append(letter)
            }
            index = end
        }
        return (long, short)
    }
}

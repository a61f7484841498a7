import XCTest
@testable import WSPipeBridge

final class DiagnosticsTests: XCTestCase {
    func testTerminalSafeEscapesC0DelAndC1ButKeepsTextAndTabs() {
        XCTAssertEqual(Diagnostics.terminalSafe("plain wörld\tok"), "plain wörld\tok")
        XCTAssertEqual(Diagnostics.terminalSafe("a\u{1B}[2Jb"), "a\\x1B[2Jb")
        XCTAssertEqual(Diagnostics.terminalSafe("line\nbreak\r"), "line\\x0Abreak\\x0D")
        XCTAssertEqual(Diagnostics.terminalSafe("\u{0}\u{7F}\u{9B}31m"), "\\x00\\x7F\\x9B31m")
        XCTAssertEqual(Diagnostics.terminalSafe("\u{A0}nbsp"), "\u{A0}nbsp", "U+00A0 is printable")
    }

    /// A bidirectional override would show "exe.png" for "gnp.exe" (Trojan Source).
    func testTerminalSafeShowsBidiOverridesAndIsolates() {
        XCTAssertEqual(Diagnostics.terminalSafe("end\u{202E}gnp.exe"), "end\\u{202E}gnp.exe")
        XCTAssertEqual(Diagnostics.terminalSafe("\u{2066}a\u{2069}\u{202A}"), "\\u{2066}a\\u{2069}\\u{202A}")
        XCTAssertEqual(Diagnostics.terminalSafe("\u{200F}rlm"), "\u{200F}rlm", "a mark is no override")
    }
}

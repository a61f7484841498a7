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
}

// The rule every tool-needing test follows (Tests/TestSupport/Tools.swift): a missing tool
// is a skip, and under CI=true a failure.
import Foundation
import XCTest
import TestSupport

final class ToolTests: XCTestCase {
    private let absent = Tool("wspipe-no-such-tool", ["/nonexistent/wspipe-no-such-tool"], package: "wspipe-no-such-package")

    func testAMissingToolIsASkipOutsideCI() {
        for environment in [[:], ["CI": "false"], ["CI": ""], ["CONTINUOUS_INTEGRATION": "true"]] {
            XCTAssertThrowsError(try absent.path(environment: environment)) { error in
                XCTAssertTrue(error is XCTSkip, "\(environment): \(error)")
                XCTAssertTrue("\(error)".contains("scripts/setup installs it: apt wspipe-no-such-package"), "\(error)")
            }
        }
    }

    func testAMissingToolIsAFailureUnderCI() {
        for environment in [["CI": "true"], ["CI": "TRUE"], ["CI": "1"]] {
            XCTAssertThrowsError(try absent.path(environment: environment)) { error in
                XCTAssertFalse(error is XCTSkip, "\(environment): a skip")
                XCTAssertTrue(error is MissingToolError, "\(environment): \(error)")
                XCTAssertTrue("\(error)".contains("CI=true"), "\(error)")
            }
        }
    }

    func testTheFirstInstalledCandidateIsUsed() throws {
        let shell = Tool("sh", ["/nonexistent/sh", "/bin/sh", "/usr/bin/sh"], package: "dash")
        XCTAssertEqual(try shell.path(environment: ["CI": "true"]), "/bin/sh")
        // A directory counts (a module for `require`); a file that is not executable does not.
        XCTAssertEqual(try Tool("tmp", ["/tmp"], package: "base-files").path(), "/tmp")
        XCTAssertThrowsError(try Tool("passwd", ["/etc/passwd"], package: "base-passwd").path(environment: ["CI": "true"]))
    }
}

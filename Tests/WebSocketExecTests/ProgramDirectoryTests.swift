// --dir's ProgramDirectory with a real child: what runs is the file that was checked, even
// when the name is replaced (by another file, or by a symlink out) between check and spawn.
import Foundation
import Glibc
import WebSocketCore
import WebSocketExec
import XCTest

final class ProgramDirectoryTests: ExecTestCase {
    private func output(of found: ProgramDirectory.Program) throws -> String? {
        let rig = try rig(ChildCommand(program: found.file), executable: found.entry.take())
        guard spin(10, until: { rig.log.messages.count == 1 }) else { return nil }
        return rig.log.messages[0].text
    }

    func testASwapAfterTheCheckDoesNotChangeWhatRuns() throws {
        let program = try script("echo checked")
        let directory = (program as NSString).deletingLastPathComponent
        let evil = try script("echo swapped in")
        let programs = try ProgramDirectory(directory: directory)
        for swap in ["rename", "symlink"] {
            try ("#!/bin/sh\necho checked\n").write(toFile: program, atomically: true, encoding: .utf8)
            chmod(program, 0o755)
            guard case .success(let found) = programs.program(for: "/run.sh/rest") else { return XCTFail("no program") }
            XCTAssertEqual(found.scriptName, "/run.sh")
            XCTAssertEqual(found.pathInfo, "/rest")
            if swap == "rename" {
                XCTAssertEqual(rename(evil, program), 0)
                try ("#!/bin/sh\necho swapped in\n").write(toFile: evil, atomically: true, encoding: .utf8)
                chmod(evil, 0o755)
            } else {
                unlink(program)
                XCTAssertEqual(symlink(evil, program), 0)
            }
            XCTAssertEqual(try output(of: found), "checked", swap)
            // Looked up again, the swapped name is what it now is: another file, or a refused link.
            switch programs.program(for: "/run.sh") {
            case .success(let again): XCTAssertEqual(swap, "rename"); XCTAssertEqual(try output(of: again), "swapped in")
            case .failure(let why): XCTAssertEqual(why, .file(.symlink), swap)
            }
            unlink(program)
        }
    }

    func testTheProgramsDescriptorIsClosedInTheParent() throws {
        let program = try script("echo once")
        let programs = try ProgramDirectory(directory: (program as NSString).deletingLastPathComponent)
        guard case .success(let found) = programs.program(for: "/run.sh") else { return XCTFail("no program") }
        func opened() -> [String] {
            let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
            return fds.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + $0) }
        }
        let real = URL(fileURLWithPath: program).resolvingSymlinksInPath().path
        XCTAssertTrue(opened().contains(real), "held until the spawn")
        XCTAssertEqual(try output(of: found), "once")
        XCTAssertFalse(opened().contains(real), "the spawn closed it")
    }
}

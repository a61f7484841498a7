// swift-tools-version:6.2
// A package that depends on wspipe as its users do: by version, from a git URL.
// scripts/consumer-check (run by `make test`) tags a snapshot of the working tree in a
// temporary bare repository and points WSPIPE_URL at it; by hand:
//   WSPIPE_URL=file:///path/to/wspipe.git swift run consumer
import PackageDescription

let wspipe = Context.environment["WSPIPE_URL"] ?? "https://github.com/OWNER/wspipe.git"
let version = Context.environment["WSPIPE_VERSION"] ?? "0.1.0"

let package = Package(
    name: "consumer",
    dependencies: [
        .package(url: wspipe, from: Version(stringLiteral: version)),
    ],
    targets: [
        .executableTarget(
            name: "consumer",
            dependencies: [
                .product(name: "WSKit", package: "wspipe"),
                .product(name: "WSKitFoundation", package: "wspipe"),
            ],
            path: "Sources/Consumer"
        ),
    ]
)

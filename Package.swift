// swift-tools-version:5.5
// Swift package for tern's C API: a system library target over include/ (tern.h and its
// module map), found through pkg-config (tern.pc from `cmake --install`). See
// docs/consuming.md ("Swift").
import PackageDescription

let package = Package(
    name: "CTern",
    products: [
        .library(name: "CTern", targets: ["CTern"]),
    ],
    targets: [
        .systemLibrary(name: "CTern", path: "include", pkgConfig: "tern"),
    ]
)

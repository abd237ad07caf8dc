// swift-tools-version:5.5
// Swift package for an installed tern (cmake --install): the system library target CTern
// over this directory's CTern/module.modulemap, whose header is the installed tern.h, and
// pkg-config (tern.pc) for the link flags. Depend on it with
//   .package(path: "<prefix>/share/tern/CTern")  // package identity: CTern
// and set PKG_CONFIG_PATH=<prefix>/lib/pkgconfig. See docs/consuming.md ("Swift").
import PackageDescription

let package = Package(
    name: "CTern",
    products: [
        .library(name: "CTern", targets: ["CTern"]),
    ],
    targets: [
        .systemLibrary(name: "CTern", path: "CTern", pkgConfig: "tern"),
    ]
)

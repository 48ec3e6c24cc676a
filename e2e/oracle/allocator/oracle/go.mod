// The allocator oracle's code shared by every version module (../v0.3x): it has no requirements of
// its own; the version module that replaces it with this folder picks the DRA library version.
module gpuclaim.test/e2e/oracle/allocator/oracle

go 1.24

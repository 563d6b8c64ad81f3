package main

// sysMemfdCreate is memfd_create(2), missing from package syscall's table.
const sysMemfdCreate = 319

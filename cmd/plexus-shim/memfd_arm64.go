package main

// sysMemfdCreate is memfd_create(2).
const sysMemfdCreate = 279

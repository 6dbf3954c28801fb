// Test doubles for programs built on rlm. Filled in as the model layer lands.
export {};

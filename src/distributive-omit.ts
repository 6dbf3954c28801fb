/** `Omit` applied to each member of a union, so the result is still a union a `switch` can narrow. */
export type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

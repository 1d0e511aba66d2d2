"""The wire format: TLV, names, Interest/Data/LP packets, fragmentation, the lean encoders and the
serialization of application values.  Imports nothing of icn's other rooms."""

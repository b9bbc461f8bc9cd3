impl serde::Serialize for ApplyManifestRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ApplyManifestRequest", len)?;
        if true {
            struct_ser.serialize_field("yaml", &self.yaml)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ApplyManifestRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "yaml",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Yaml,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "yaml" => Ok(GeneratedField::Yaml),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ApplyManifestRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ApplyManifestRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ApplyManifestRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut yaml__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Yaml => {
                            if yaml__.is_some() {
                                return Err(serde::de::Error::duplicate_field("yaml"));
                            }
                            yaml__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ApplyManifestRequest {
                    yaml: yaml__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ApplyManifestRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ApplyManifestResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ApplyManifestResponse", len)?;
        if true {
            struct_ser.serialize_field("results", &self.results)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ApplyManifestResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "results",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Results,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "results" => Ok(GeneratedField::Results),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ApplyManifestResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ApplyManifestResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ApplyManifestResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut results__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Results => {
                            if results__.is_some() {
                                return Err(serde::de::Error::duplicate_field("results"));
                            }
                            results__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ApplyManifestResponse {
                    results: results__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ApplyManifestResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ApplyResizeRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ApplyResizeRequest", len)?;
        if true {
            struct_ser.serialize_field("podUid", &self.pod_uid)?;
        }
        if true {
            struct_ser.serialize_field("containers", &self.containers)?;
        }
        if let Some(v) = self.pod.as_ref() {
            struct_ser.serialize_field("pod", v)?;
        }
        if true {
            struct_ser.serialize_field("reservationId", &self.reservation_id)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ApplyResizeRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pod_uid",
            "podUid",
            "containers",
            "pod",
            "reservation_id",
            "reservationId",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            PodUid,
            Containers,
            Pod,
            ReservationId,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "podUid" | "pod_uid" => Ok(GeneratedField::PodUid),
                            "containers" => Ok(GeneratedField::Containers),
                            "pod" => Ok(GeneratedField::Pod),
                            "reservationId" | "reservation_id" => Ok(GeneratedField::ReservationId),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ApplyResizeRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ApplyResizeRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ApplyResizeRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pod_uid__ = None;
                let mut containers__ = None;
                let mut pod__ = None;
                let mut reservation_id__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::PodUid => {
                            if pod_uid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("podUid"));
                            }
                            pod_uid__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Containers => {
                            if containers__.is_some() {
                                return Err(serde::de::Error::duplicate_field("containers"));
                            }
                            containers__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = map_.next_value()?;
                        }
                        GeneratedField::ReservationId => {
                            if reservation_id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservationId"));
                            }
                            reservation_id__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ApplyResizeRequest {
                    pod_uid: pod_uid__.unwrap_or_default(),
                    containers: containers__.unwrap_or_default(),
                    pod: pod__,
                    reservation_id: reservation_id__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ApplyResizeRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ApplyResizeResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ApplyResizeResponse", len)?;
        if true {
            struct_ser.serialize_field("phases", &self.phases)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("totalNs", ToString::to_string(&self.total_ns).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ApplyResizeResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "phases",
            "total_ns",
            "totalNs",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Phases,
            TotalNs,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "phases" => Ok(GeneratedField::Phases),
                            "totalNs" | "total_ns" => Ok(GeneratedField::TotalNs),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ApplyResizeResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ApplyResizeResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ApplyResizeResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut phases__ = None;
                let mut total_ns__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Phases => {
                            if phases__.is_some() {
                                return Err(serde::de::Error::duplicate_field("phases"));
                            }
                            phases__ = Some(map_.next_value()?);
                        }
                        GeneratedField::TotalNs => {
                            if total_ns__.is_some() {
                                return Err(serde::de::Error::duplicate_field("totalNs"));
                            }
                            total_ns__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(ApplyResizeResponse {
                    phases: phases__.unwrap_or_default(),
                    total_ns: total_ns__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ApplyResizeResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ContainerPressure {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ContainerPressure", len)?;
        if true {
            struct_ser.serialize_field("name", &self.name)?;
        }
        if let Some(v) = self.pressure.as_ref() {
            struct_ser.serialize_field("pressure", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ContainerPressure {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "name",
            "pressure",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Name,
            Pressure,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "name" => Ok(GeneratedField::Name),
                            "pressure" => Ok(GeneratedField::Pressure),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ContainerPressure;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ContainerPressure")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ContainerPressure, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut name__ = None;
                let mut pressure__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Name => {
                            if name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("name"));
                            }
                            name__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Pressure => {
                            if pressure__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pressure"));
                            }
                            pressure__ = map_.next_value()?;
                        }
                    }
                }
                Ok(ContainerPressure {
                    name: name__.unwrap_or_default(),
                    pressure: pressure__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ContainerPressure", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ContainerResources {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ContainerResources", len)?;
        if true {
            struct_ser.serialize_field("name", &self.name)?;
        }
        if let Some(v) = self.cpu_request_millis.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuRequestMillis", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.cpu_limit_millis.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuLimitMillis", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.memory_request_bytes.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryRequestBytes", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.memory_limit_bytes.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryLimitBytes", ToString::to_string(&v).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ContainerResources {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "name",
            "cpu_request_millis",
            "cpuRequestMillis",
            "cpu_limit_millis",
            "cpuLimitMillis",
            "memory_request_bytes",
            "memoryRequestBytes",
            "memory_limit_bytes",
            "memoryLimitBytes",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Name,
            CpuRequestMillis,
            CpuLimitMillis,
            MemoryRequestBytes,
            MemoryLimitBytes,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "name" => Ok(GeneratedField::Name),
                            "cpuRequestMillis" | "cpu_request_millis" => Ok(GeneratedField::CpuRequestMillis),
                            "cpuLimitMillis" | "cpu_limit_millis" => Ok(GeneratedField::CpuLimitMillis),
                            "memoryRequestBytes" | "memory_request_bytes" => Ok(GeneratedField::MemoryRequestBytes),
                            "memoryLimitBytes" | "memory_limit_bytes" => Ok(GeneratedField::MemoryLimitBytes),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ContainerResources;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ContainerResources")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ContainerResources, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut name__ = None;
                let mut cpu_request_millis__ = None;
                let mut cpu_limit_millis__ = None;
                let mut memory_request_bytes__ = None;
                let mut memory_limit_bytes__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Name => {
                            if name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("name"));
                            }
                            name__ = Some(map_.next_value()?);
                        }
                        GeneratedField::CpuRequestMillis => {
                            if cpu_request_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuRequestMillis"));
                            }
                            cpu_request_millis__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::CpuLimitMillis => {
                            if cpu_limit_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuLimitMillis"));
                            }
                            cpu_limit_millis__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::MemoryRequestBytes => {
                            if memory_request_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryRequestBytes"));
                            }
                            memory_request_bytes__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::MemoryLimitBytes => {
                            if memory_limit_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryLimitBytes"));
                            }
                            memory_limit_bytes__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                    }
                }
                Ok(ContainerResources {
                    name: name__.unwrap_or_default(),
                    cpu_request_millis: cpu_request_millis__,
                    cpu_limit_millis: cpu_limit_millis__,
                    memory_request_bytes: memory_request_bytes__,
                    memory_limit_bytes: memory_limit_bytes__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ContainerResources", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ExplainRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ExplainRequest", len)?;
        if true {
            struct_ser.serialize_field("pod", &self.pod)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ExplainRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pod",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Pod,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "pod" => Ok(GeneratedField::Pod),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ExplainRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ExplainRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ExplainRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pod__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ExplainRequest {
                    pod: pod__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ExplainRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ExplainResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ExplainResponse", len)?;
        if true {
            struct_ser.serialize_field("outcome", &self.outcome)?;
        }
        if true {
            struct_ser.serialize_field("text", &self.text)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ExplainResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "outcome",
            "text",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Outcome,
            Text,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "outcome" => Ok(GeneratedField::Outcome),
                            "text" => Ok(GeneratedField::Text),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ExplainResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ExplainResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ExplainResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut outcome__ = None;
                let mut text__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Outcome => {
                            if outcome__.is_some() {
                                return Err(serde::de::Error::duplicate_field("outcome"));
                            }
                            outcome__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Text => {
                            if text__.is_some() {
                                return Err(serde::de::Error::duplicate_field("text"));
                            }
                            text__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ExplainResponse {
                    outcome: outcome__.unwrap_or_default(),
                    text: text__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ExplainResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for Figure {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.Figure", len)?;
        if true {
            struct_ser.serialize_field("value", &self.value)?;
        }
        if let Some(v) = self.measured_at.as_ref() {
            struct_ser.serialize_field("measuredAt", v)?;
        }
        if true {
            struct_ser.serialize_field("stale", &self.stale)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for Figure {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "value",
            "measured_at",
            "measuredAt",
            "stale",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Value,
            MeasuredAt,
            Stale,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "value" => Ok(GeneratedField::Value),
                            "measuredAt" | "measured_at" => Ok(GeneratedField::MeasuredAt),
                            "stale" => Ok(GeneratedField::Stale),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = Figure;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.Figure")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<Figure, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut value__ = None;
                let mut measured_at__ = None;
                let mut stale__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Value => {
                            if value__.is_some() {
                                return Err(serde::de::Error::duplicate_field("value"));
                            }
                            value__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::MeasuredAt => {
                            if measured_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("measuredAt"));
                            }
                            measured_at__ = map_.next_value()?;
                        }
                        GeneratedField::Stale => {
                            if stale__.is_some() {
                                return Err(serde::de::Error::duplicate_field("stale"));
                            }
                            stale__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(Figure {
                    value: value__.unwrap_or_default(),
                    measured_at: measured_at__,
                    stale: stale__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.Figure", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for GetHeadroomRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.GetHeadroomRequest", len)?;
        if true {
            struct_ser.serialize_field("includePods", &self.include_pods)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for GetHeadroomRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "include_pods",
            "includePods",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            IncludePods,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "includePods" | "include_pods" => Ok(GeneratedField::IncludePods),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = GetHeadroomRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.GetHeadroomRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<GetHeadroomRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut include_pods__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::IncludePods => {
                            if include_pods__.is_some() {
                                return Err(serde::de::Error::duplicate_field("includePods"));
                            }
                            include_pods__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(GetHeadroomRequest {
                    include_pods: include_pods__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.GetHeadroomRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for GetPodsRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let len = 0;
        let struct_ser = serializer.serialize_struct("headroom.v1.GetPodsRequest", len)?;
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for GetPodsRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                            Err(serde::de::Error::unknown_field(value, FIELDS))
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = GetPodsRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.GetPodsRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<GetPodsRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                while map_.next_key::<GeneratedField>()?.is_some() {
                    let _ = map_.next_value::<serde::de::IgnoredAny>()?;
                }
                Ok(GetPodsRequest {
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.GetPodsRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for GetPodsResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.GetPodsResponse", len)?;
        if true {
            struct_ser.serialize_field("pods", &self.pods)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for GetPodsResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pods",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Pods,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "pods" => Ok(GeneratedField::Pods),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = GetPodsResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.GetPodsResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<GetPodsResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pods__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Pods => {
                            if pods__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pods"));
                            }
                            pods__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(GetPodsResponse {
                    pods: pods__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.GetPodsResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for HeadroomSnapshot {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.HeadroomSnapshot", len)?;
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("version", ToString::to_string(&self.version).as_str())?;
        }
        if true {
            struct_ser.serialize_field("nodeName", &self.node_name)?;
        }
        if let Some(v) = self.generated_at.as_ref() {
            struct_ser.serialize_field("generatedAt", v)?;
        }
        if let Some(v) = self.node.as_ref() {
            struct_ser.serialize_field("node", v)?;
        }
        if let Some(v) = self.node_pressure.as_ref() {
            struct_ser.serialize_field("nodePressure", v)?;
        }
        if true {
            struct_ser.serialize_field("pods", &self.pods)?;
        }
        if true {
            struct_ser.serialize_field("reservations", &self.reservations)?;
        }
        if let Some(v) = self.pipeline.as_ref() {
            struct_ser.serialize_field("pipeline", v)?;
        }
        if true {
            struct_ser.serialize_field("kernelEvents", &self.kernel_events)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for HeadroomSnapshot {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "version",
            "node_name",
            "nodeName",
            "generated_at",
            "generatedAt",
            "node",
            "node_pressure",
            "nodePressure",
            "pods",
            "reservations",
            "pipeline",
            "kernel_events",
            "kernelEvents",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Version,
            NodeName,
            GeneratedAt,
            Node,
            NodePressure,
            Pods,
            Reservations,
            Pipeline,
            KernelEvents,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "version" => Ok(GeneratedField::Version),
                            "nodeName" | "node_name" => Ok(GeneratedField::NodeName),
                            "generatedAt" | "generated_at" => Ok(GeneratedField::GeneratedAt),
                            "node" => Ok(GeneratedField::Node),
                            "nodePressure" | "node_pressure" => Ok(GeneratedField::NodePressure),
                            "pods" => Ok(GeneratedField::Pods),
                            "reservations" => Ok(GeneratedField::Reservations),
                            "pipeline" => Ok(GeneratedField::Pipeline),
                            "kernelEvents" | "kernel_events" => Ok(GeneratedField::KernelEvents),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = HeadroomSnapshot;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.HeadroomSnapshot")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<HeadroomSnapshot, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut version__ = None;
                let mut node_name__ = None;
                let mut generated_at__ = None;
                let mut node__ = None;
                let mut node_pressure__ = None;
                let mut pods__ = None;
                let mut reservations__ = None;
                let mut pipeline__ = None;
                let mut kernel_events__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Version => {
                            if version__.is_some() {
                                return Err(serde::de::Error::duplicate_field("version"));
                            }
                            version__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::NodeName => {
                            if node_name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("nodeName"));
                            }
                            node_name__ = Some(map_.next_value()?);
                        }
                        GeneratedField::GeneratedAt => {
                            if generated_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("generatedAt"));
                            }
                            generated_at__ = map_.next_value()?;
                        }
                        GeneratedField::Node => {
                            if node__.is_some() {
                                return Err(serde::de::Error::duplicate_field("node"));
                            }
                            node__ = map_.next_value()?;
                        }
                        GeneratedField::NodePressure => {
                            if node_pressure__.is_some() {
                                return Err(serde::de::Error::duplicate_field("nodePressure"));
                            }
                            node_pressure__ = map_.next_value()?;
                        }
                        GeneratedField::Pods => {
                            if pods__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pods"));
                            }
                            pods__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Reservations => {
                            if reservations__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservations"));
                            }
                            reservations__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Pipeline => {
                            if pipeline__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pipeline"));
                            }
                            pipeline__ = map_.next_value()?;
                        }
                        GeneratedField::KernelEvents => {
                            if kernel_events__.is_some() {
                                return Err(serde::de::Error::duplicate_field("kernelEvents"));
                            }
                            kernel_events__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(HeadroomSnapshot {
                    version: version__.unwrap_or_default(),
                    node_name: node_name__.unwrap_or_default(),
                    generated_at: generated_at__,
                    node: node__,
                    node_pressure: node_pressure__,
                    pods: pods__.unwrap_or_default(),
                    reservations: reservations__.unwrap_or_default(),
                    pipeline: pipeline__,
                    kernel_events: kernel_events__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.HeadroomSnapshot", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for KernelEvent {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.KernelEvent", len)?;
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("sequence", ToString::to_string(&self.sequence).as_str())?;
        }
        if true {
            let v = KernelEventKind::try_from(self.kind)
                .map_err(|_| serde::ser::Error::custom(format!("Invalid variant {}", self.kind)))?;
            struct_ser.serialize_field("kind", &v)?;
        }
        if true {
            struct_ser.serialize_field("podUid", &self.pod_uid)?;
        }
        if true {
            struct_ser.serialize_field("container", &self.container)?;
        }
        if true {
            struct_ser.serialize_field("cgroupHierarchyId", &self.cgroup_hierarchy_id)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cgroupId", ToString::to_string(&self.cgroup_id).as_str())?;
        }
        if true {
            struct_ser.serialize_field("pid", &self.pid)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("boottimeNs", ToString::to_string(&self.boottime_ns).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("durationNs", ToString::to_string(&self.duration_ns).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for KernelEvent {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "sequence",
            "kind",
            "pod_uid",
            "podUid",
            "container",
            "cgroup_hierarchy_id",
            "cgroupHierarchyId",
            "cgroup_id",
            "cgroupId",
            "pid",
            "boottime_ns",
            "boottimeNs",
            "duration_ns",
            "durationNs",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Sequence,
            Kind,
            PodUid,
            Container,
            CgroupHierarchyId,
            CgroupId,
            Pid,
            BoottimeNs,
            DurationNs,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "sequence" => Ok(GeneratedField::Sequence),
                            "kind" => Ok(GeneratedField::Kind),
                            "podUid" | "pod_uid" => Ok(GeneratedField::PodUid),
                            "container" => Ok(GeneratedField::Container),
                            "cgroupHierarchyId" | "cgroup_hierarchy_id" => Ok(GeneratedField::CgroupHierarchyId),
                            "cgroupId" | "cgroup_id" => Ok(GeneratedField::CgroupId),
                            "pid" => Ok(GeneratedField::Pid),
                            "boottimeNs" | "boottime_ns" => Ok(GeneratedField::BoottimeNs),
                            "durationNs" | "duration_ns" => Ok(GeneratedField::DurationNs),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = KernelEvent;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.KernelEvent")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<KernelEvent, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut sequence__ = None;
                let mut kind__ = None;
                let mut pod_uid__ = None;
                let mut container__ = None;
                let mut cgroup_hierarchy_id__ = None;
                let mut cgroup_id__ = None;
                let mut pid__ = None;
                let mut boottime_ns__ = None;
                let mut duration_ns__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Sequence => {
                            if sequence__.is_some() {
                                return Err(serde::de::Error::duplicate_field("sequence"));
                            }
                            sequence__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Kind => {
                            if kind__.is_some() {
                                return Err(serde::de::Error::duplicate_field("kind"));
                            }
                            kind__ = Some(map_.next_value::<KernelEventKind>()? as i32);
                        }
                        GeneratedField::PodUid => {
                            if pod_uid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("podUid"));
                            }
                            pod_uid__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Container => {
                            if container__.is_some() {
                                return Err(serde::de::Error::duplicate_field("container"));
                            }
                            container__ = Some(map_.next_value()?);
                        }
                        GeneratedField::CgroupHierarchyId => {
                            if cgroup_hierarchy_id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cgroupHierarchyId"));
                            }
                            cgroup_hierarchy_id__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::CgroupId => {
                            if cgroup_id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cgroupId"));
                            }
                            cgroup_id__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Pid => {
                            if pid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pid"));
                            }
                            pid__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::BoottimeNs => {
                            if boottime_ns__.is_some() {
                                return Err(serde::de::Error::duplicate_field("boottimeNs"));
                            }
                            boottime_ns__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::DurationNs => {
                            if duration_ns__.is_some() {
                                return Err(serde::de::Error::duplicate_field("durationNs"));
                            }
                            duration_ns__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(KernelEvent {
                    sequence: sequence__.unwrap_or_default(),
                    kind: kind__.unwrap_or_default(),
                    pod_uid: pod_uid__.unwrap_or_default(),
                    container: container__.unwrap_or_default(),
                    cgroup_hierarchy_id: cgroup_hierarchy_id__.unwrap_or_default(),
                    cgroup_id: cgroup_id__.unwrap_or_default(),
                    pid: pid__.unwrap_or_default(),
                    boottime_ns: boottime_ns__.unwrap_or_default(),
                    duration_ns: duration_ns__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.KernelEvent", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for KernelEventKind {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        let variant = match self {
            Self::Unspecified => "KERNEL_EVENT_KIND_UNSPECIFIED",
            Self::ThrottleBegin => "KERNEL_EVENT_KIND_THROTTLE_BEGIN",
            Self::ThrottleEnd => "KERNEL_EVENT_KIND_THROTTLE_END",
            Self::MemcgReclaimStall => "KERNEL_EVENT_KIND_MEMCG_RECLAIM_STALL",
            Self::DirectReclaimStall => "KERNEL_EVENT_KIND_DIRECT_RECLAIM_STALL",
            Self::OomKill => "KERNEL_EVENT_KIND_OOM_KILL",
            Self::CgroupMkdir => "KERNEL_EVENT_KIND_CGROUP_MKDIR",
            Self::CgroupRmdir => "KERNEL_EVENT_KIND_CGROUP_RMDIR",
        };
        serializer.serialize_str(variant)
    }
}
impl<'de> serde::Deserialize<'de> for KernelEventKind {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "KERNEL_EVENT_KIND_UNSPECIFIED",
            "KERNEL_EVENT_KIND_THROTTLE_BEGIN",
            "KERNEL_EVENT_KIND_THROTTLE_END",
            "KERNEL_EVENT_KIND_MEMCG_RECLAIM_STALL",
            "KERNEL_EVENT_KIND_DIRECT_RECLAIM_STALL",
            "KERNEL_EVENT_KIND_OOM_KILL",
            "KERNEL_EVENT_KIND_CGROUP_MKDIR",
            "KERNEL_EVENT_KIND_CGROUP_RMDIR",
        ];

        struct GeneratedVisitor;

        impl serde::de::Visitor<'_> for GeneratedVisitor {
            type Value = KernelEventKind;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(formatter, "expected one of: {:?}", &FIELDS)
            }

            fn visit_i64<E>(self, v: i64) -> std::result::Result<Self::Value, E>
            where
                E: serde::de::Error,
            {
                i32::try_from(v)
                    .ok()
                    .and_then(|x| x.try_into().ok())
                    .ok_or_else(|| {
                        serde::de::Error::invalid_value(serde::de::Unexpected::Signed(v), &self)
                    })
            }

            fn visit_u64<E>(self, v: u64) -> std::result::Result<Self::Value, E>
            where
                E: serde::de::Error,
            {
                i32::try_from(v)
                    .ok()
                    .and_then(|x| x.try_into().ok())
                    .ok_or_else(|| {
                        serde::de::Error::invalid_value(serde::de::Unexpected::Unsigned(v), &self)
                    })
            }

            fn visit_str<E>(self, value: &str) -> std::result::Result<Self::Value, E>
            where
                E: serde::de::Error,
            {
                match value {
                    "KERNEL_EVENT_KIND_UNSPECIFIED" => Ok(KernelEventKind::Unspecified),
                    "KERNEL_EVENT_KIND_THROTTLE_BEGIN" => Ok(KernelEventKind::ThrottleBegin),
                    "KERNEL_EVENT_KIND_THROTTLE_END" => Ok(KernelEventKind::ThrottleEnd),
                    "KERNEL_EVENT_KIND_MEMCG_RECLAIM_STALL" => Ok(KernelEventKind::MemcgReclaimStall),
                    "KERNEL_EVENT_KIND_DIRECT_RECLAIM_STALL" => Ok(KernelEventKind::DirectReclaimStall),
                    "KERNEL_EVENT_KIND_OOM_KILL" => Ok(KernelEventKind::OomKill),
                    "KERNEL_EVENT_KIND_CGROUP_MKDIR" => Ok(KernelEventKind::CgroupMkdir),
                    "KERNEL_EVENT_KIND_CGROUP_RMDIR" => Ok(KernelEventKind::CgroupRmdir),
                    _ => Err(serde::de::Error::unknown_variant(value, FIELDS)),
                }
            }
        }
        deserializer.deserialize_any(GeneratedVisitor)
    }
}
impl serde::Serialize for ListEventsRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ListEventsRequest", len)?;
        if true {
            struct_ser.serialize_field("involvedObjectName", &self.involved_object_name)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ListEventsRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "involved_object_name",
            "involvedObjectName",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            InvolvedObjectName,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "involvedObjectName" | "involved_object_name" => Ok(GeneratedField::InvolvedObjectName),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ListEventsRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ListEventsRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ListEventsRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut involved_object_name__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::InvolvedObjectName => {
                            if involved_object_name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("involvedObjectName"));
                            }
                            involved_object_name__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ListEventsRequest {
                    involved_object_name: involved_object_name__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ListEventsRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ListEventsResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ListEventsResponse", len)?;
        if true {
            struct_ser.serialize_field("events", &self.events)?;
        }
        if let Some(v) = self.now.as_ref() {
            struct_ser.serialize_field("now", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ListEventsResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "events",
            "now",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Events,
            Now,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "events" => Ok(GeneratedField::Events),
                            "now" => Ok(GeneratedField::Now),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ListEventsResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ListEventsResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ListEventsResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut events__ = None;
                let mut now__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Events => {
                            if events__.is_some() {
                                return Err(serde::de::Error::duplicate_field("events"));
                            }
                            events__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Now => {
                            if now__.is_some() {
                                return Err(serde::de::Error::duplicate_field("now"));
                            }
                            now__ = map_.next_value()?;
                        }
                    }
                }
                Ok(ListEventsResponse {
                    events: events__.unwrap_or_default(),
                    now: now__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ListEventsResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ListPodsRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ListPodsRequest", len)?;
        if true {
            struct_ser.serialize_field("namespace", &self.namespace)?;
        }
        if true {
            struct_ser.serialize_field("podUid", &self.pod_uid)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ListPodsRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "namespace",
            "pod_uid",
            "podUid",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Namespace,
            PodUid,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "namespace" => Ok(GeneratedField::Namespace),
                            "podUid" | "pod_uid" => Ok(GeneratedField::PodUid),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ListPodsRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ListPodsRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ListPodsRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut namespace__ = None;
                let mut pod_uid__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Namespace => {
                            if namespace__.is_some() {
                                return Err(serde::de::Error::duplicate_field("namespace"));
                            }
                            namespace__ = Some(map_.next_value()?);
                        }
                        GeneratedField::PodUid => {
                            if pod_uid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("podUid"));
                            }
                            pod_uid__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ListPodsRequest {
                    namespace: namespace__.unwrap_or_default(),
                    pod_uid: pod_uid__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ListPodsRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ListPodsResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ListPodsResponse", len)?;
        if true {
            struct_ser.serialize_field("pods", &self.pods)?;
        }
        if let Some(v) = self.generated_at.as_ref() {
            struct_ser.serialize_field("generatedAt", v)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("version", ToString::to_string(&self.version).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ListPodsResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pods",
            "generated_at",
            "generatedAt",
            "version",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Pods,
            GeneratedAt,
            Version,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "pods" => Ok(GeneratedField::Pods),
                            "generatedAt" | "generated_at" => Ok(GeneratedField::GeneratedAt),
                            "version" => Ok(GeneratedField::Version),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ListPodsResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ListPodsResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ListPodsResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pods__ = None;
                let mut generated_at__ = None;
                let mut version__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Pods => {
                            if pods__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pods"));
                            }
                            pods__ = Some(map_.next_value()?);
                        }
                        GeneratedField::GeneratedAt => {
                            if generated_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("generatedAt"));
                            }
                            generated_at__ = map_.next_value()?;
                        }
                        GeneratedField::Version => {
                            if version__.is_some() {
                                return Err(serde::de::Error::duplicate_field("version"));
                            }
                            version__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(ListPodsResponse {
                    pods: pods__.unwrap_or_default(),
                    generated_at: generated_at__,
                    version: version__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ListPodsResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for NodeHeadroom {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.NodeHeadroom", len)?;
        if let Some(v) = self.cpu_millis.as_ref() {
            struct_ser.serialize_field("cpuMillis", v)?;
        }
        if let Some(v) = self.memory_bytes.as_ref() {
            struct_ser.serialize_field("memoryBytes", v)?;
        }
        if let Some(v) = self.measured_at.as_ref() {
            struct_ser.serialize_field("measuredAt", v)?;
        }
        if true {
            struct_ser.serialize_field("stale", &self.stale)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for NodeHeadroom {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "cpu_millis",
            "cpuMillis",
            "memory_bytes",
            "memoryBytes",
            "measured_at",
            "measuredAt",
            "stale",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            CpuMillis,
            MemoryBytes,
            MeasuredAt,
            Stale,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "cpuMillis" | "cpu_millis" => Ok(GeneratedField::CpuMillis),
                            "memoryBytes" | "memory_bytes" => Ok(GeneratedField::MemoryBytes),
                            "measuredAt" | "measured_at" => Ok(GeneratedField::MeasuredAt),
                            "stale" => Ok(GeneratedField::Stale),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = NodeHeadroom;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.NodeHeadroom")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<NodeHeadroom, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut cpu_millis__ = None;
                let mut memory_bytes__ = None;
                let mut measured_at__ = None;
                let mut stale__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::CpuMillis => {
                            if cpu_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuMillis"));
                            }
                            cpu_millis__ = map_.next_value()?;
                        }
                        GeneratedField::MemoryBytes => {
                            if memory_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryBytes"));
                            }
                            memory_bytes__ = map_.next_value()?;
                        }
                        GeneratedField::MeasuredAt => {
                            if measured_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("measuredAt"));
                            }
                            measured_at__ = map_.next_value()?;
                        }
                        GeneratedField::Stale => {
                            if stale__.is_some() {
                                return Err(serde::de::Error::duplicate_field("stale"));
                            }
                            stale__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(NodeHeadroom {
                    cpu_millis: cpu_millis__,
                    memory_bytes: memory_bytes__,
                    measured_at: measured_at__,
                    stale: stale__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.NodeHeadroom", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PhaseLatency {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PhaseLatency", len)?;
        if true {
            struct_ser.serialize_field("phase", &self.phase)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("durationNs", ToString::to_string(&self.duration_ns).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PhaseLatency {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "phase",
            "duration_ns",
            "durationNs",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Phase,
            DurationNs,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "phase" => Ok(GeneratedField::Phase),
                            "durationNs" | "duration_ns" => Ok(GeneratedField::DurationNs),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PhaseLatency;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PhaseLatency")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PhaseLatency, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut phase__ = None;
                let mut duration_ns__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Phase => {
                            if phase__.is_some() {
                                return Err(serde::de::Error::duplicate_field("phase"));
                            }
                            phase__ = Some(map_.next_value()?);
                        }
                        GeneratedField::DurationNs => {
                            if duration_ns__.is_some() {
                                return Err(serde::de::Error::duplicate_field("durationNs"));
                            }
                            duration_ns__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(PhaseLatency {
                    phase: phase__.unwrap_or_default(),
                    duration_ns: duration_ns__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PhaseLatency", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PipelineStats {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PipelineStats", len)?;
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("processedTotal", ToString::to_string(&self.processed_total).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("droppedTotal", ToString::to_string(&self.dropped_total).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("unattributedTotal", ToString::to_string(&self.unattributed_total).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("queueCapacity", ToString::to_string(&self.queue_capacity).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PipelineStats {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "processed_total",
            "processedTotal",
            "dropped_total",
            "droppedTotal",
            "unattributed_total",
            "unattributedTotal",
            "queue_capacity",
            "queueCapacity",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            ProcessedTotal,
            DroppedTotal,
            UnattributedTotal,
            QueueCapacity,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "processedTotal" | "processed_total" => Ok(GeneratedField::ProcessedTotal),
                            "droppedTotal" | "dropped_total" => Ok(GeneratedField::DroppedTotal),
                            "unattributedTotal" | "unattributed_total" => Ok(GeneratedField::UnattributedTotal),
                            "queueCapacity" | "queue_capacity" => Ok(GeneratedField::QueueCapacity),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PipelineStats;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PipelineStats")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PipelineStats, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut processed_total__ = None;
                let mut dropped_total__ = None;
                let mut unattributed_total__ = None;
                let mut queue_capacity__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::ProcessedTotal => {
                            if processed_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("processedTotal"));
                            }
                            processed_total__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::DroppedTotal => {
                            if dropped_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("droppedTotal"));
                            }
                            dropped_total__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::UnattributedTotal => {
                            if unattributed_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("unattributedTotal"));
                            }
                            unattributed_total__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::QueueCapacity => {
                            if queue_capacity__.is_some() {
                                return Err(serde::de::Error::duplicate_field("queueCapacity"));
                            }
                            queue_capacity__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(PipelineStats {
                    processed_total: processed_total__.unwrap_or_default(),
                    dropped_total: dropped_total__.unwrap_or_default(),
                    unattributed_total: unattributed_total__.unwrap_or_default(),
                    queue_capacity: queue_capacity__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PipelineStats", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PodEvent {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PodEvent", len)?;
        if true {
            struct_ser.serialize_field("type", &self.r#type)?;
        }
        if true {
            struct_ser.serialize_field("reason", &self.reason)?;
        }
        if true {
            struct_ser.serialize_field("object", &self.object)?;
        }
        if true {
            struct_ser.serialize_field("message", &self.message)?;
        }
        if let Some(v) = self.first_timestamp.as_ref() {
            struct_ser.serialize_field("firstTimestamp", v)?;
        }
        if let Some(v) = self.last_timestamp.as_ref() {
            struct_ser.serialize_field("lastTimestamp", v)?;
        }
        if true {
            struct_ser.serialize_field("count", &self.count)?;
        }
        if true {
            struct_ser.serialize_field("source", &self.source)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PodEvent {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "type",
            "reason",
            "object",
            "message",
            "first_timestamp",
            "firstTimestamp",
            "last_timestamp",
            "lastTimestamp",
            "count",
            "source",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Type,
            Reason,
            Object,
            Message,
            FirstTimestamp,
            LastTimestamp,
            Count,
            Source,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "type" => Ok(GeneratedField::Type),
                            "reason" => Ok(GeneratedField::Reason),
                            "object" => Ok(GeneratedField::Object),
                            "message" => Ok(GeneratedField::Message),
                            "firstTimestamp" | "first_timestamp" => Ok(GeneratedField::FirstTimestamp),
                            "lastTimestamp" | "last_timestamp" => Ok(GeneratedField::LastTimestamp),
                            "count" => Ok(GeneratedField::Count),
                            "source" => Ok(GeneratedField::Source),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PodEvent;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PodEvent")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PodEvent, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut r#type__ = None;
                let mut reason__ = None;
                let mut object__ = None;
                let mut message__ = None;
                let mut first_timestamp__ = None;
                let mut last_timestamp__ = None;
                let mut count__ = None;
                let mut source__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Type => {
                            if r#type__.is_some() {
                                return Err(serde::de::Error::duplicate_field("type"));
                            }
                            r#type__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Reason => {
                            if reason__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reason"));
                            }
                            reason__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Object => {
                            if object__.is_some() {
                                return Err(serde::de::Error::duplicate_field("object"));
                            }
                            object__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Message => {
                            if message__.is_some() {
                                return Err(serde::de::Error::duplicate_field("message"));
                            }
                            message__ = Some(map_.next_value()?);
                        }
                        GeneratedField::FirstTimestamp => {
                            if first_timestamp__.is_some() {
                                return Err(serde::de::Error::duplicate_field("firstTimestamp"));
                            }
                            first_timestamp__ = map_.next_value()?;
                        }
                        GeneratedField::LastTimestamp => {
                            if last_timestamp__.is_some() {
                                return Err(serde::de::Error::duplicate_field("lastTimestamp"));
                            }
                            last_timestamp__ = map_.next_value()?;
                        }
                        GeneratedField::Count => {
                            if count__.is_some() {
                                return Err(serde::de::Error::duplicate_field("count"));
                            }
                            count__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Source => {
                            if source__.is_some() {
                                return Err(serde::de::Error::duplicate_field("source"));
                            }
                            source__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(PodEvent {
                    r#type: r#type__.unwrap_or_default(),
                    reason: reason__.unwrap_or_default(),
                    object: object__.unwrap_or_default(),
                    message: message__.unwrap_or_default(),
                    first_timestamp: first_timestamp__,
                    last_timestamp: last_timestamp__,
                    count: count__.unwrap_or_default(),
                    source: source__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PodEvent", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PodLevelResources {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PodLevelResources", len)?;
        if let Some(v) = self.cpu_request_millis.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuRequestMillis", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.cpu_limit_millis.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuLimitMillis", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.memory_request_bytes.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryRequestBytes", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.memory_limit_bytes.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryLimitBytes", ToString::to_string(&v).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PodLevelResources {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "cpu_request_millis",
            "cpuRequestMillis",
            "cpu_limit_millis",
            "cpuLimitMillis",
            "memory_request_bytes",
            "memoryRequestBytes",
            "memory_limit_bytes",
            "memoryLimitBytes",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            CpuRequestMillis,
            CpuLimitMillis,
            MemoryRequestBytes,
            MemoryLimitBytes,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "cpuRequestMillis" | "cpu_request_millis" => Ok(GeneratedField::CpuRequestMillis),
                            "cpuLimitMillis" | "cpu_limit_millis" => Ok(GeneratedField::CpuLimitMillis),
                            "memoryRequestBytes" | "memory_request_bytes" => Ok(GeneratedField::MemoryRequestBytes),
                            "memoryLimitBytes" | "memory_limit_bytes" => Ok(GeneratedField::MemoryLimitBytes),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PodLevelResources;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PodLevelResources")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PodLevelResources, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut cpu_request_millis__ = None;
                let mut cpu_limit_millis__ = None;
                let mut memory_request_bytes__ = None;
                let mut memory_limit_bytes__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::CpuRequestMillis => {
                            if cpu_request_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuRequestMillis"));
                            }
                            cpu_request_millis__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::CpuLimitMillis => {
                            if cpu_limit_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuLimitMillis"));
                            }
                            cpu_limit_millis__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::MemoryRequestBytes => {
                            if memory_request_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryRequestBytes"));
                            }
                            memory_request_bytes__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::MemoryLimitBytes => {
                            if memory_limit_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryLimitBytes"));
                            }
                            memory_limit_bytes__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                    }
                }
                Ok(PodLevelResources {
                    cpu_request_millis: cpu_request_millis__,
                    cpu_limit_millis: cpu_limit_millis__,
                    memory_request_bytes: memory_request_bytes__,
                    memory_limit_bytes: memory_limit_bytes__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PodLevelResources", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PodPressure {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PodPressure", len)?;
        if let Some(v) = self.pod.as_ref() {
            struct_ser.serialize_field("pod", v)?;
        }
        if let Some(v) = self.pod_cgroup.as_ref() {
            struct_ser.serialize_field("podCgroup", v)?;
        }
        if true {
            struct_ser.serialize_field("containers", &self.containers)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PodPressure {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pod",
            "pod_cgroup",
            "podCgroup",
            "containers",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Pod,
            PodCgroup,
            Containers,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "pod" => Ok(GeneratedField::Pod),
                            "podCgroup" | "pod_cgroup" => Ok(GeneratedField::PodCgroup),
                            "containers" => Ok(GeneratedField::Containers),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PodPressure;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PodPressure")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PodPressure, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pod__ = None;
                let mut pod_cgroup__ = None;
                let mut containers__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = map_.next_value()?;
                        }
                        GeneratedField::PodCgroup => {
                            if pod_cgroup__.is_some() {
                                return Err(serde::de::Error::duplicate_field("podCgroup"));
                            }
                            pod_cgroup__ = map_.next_value()?;
                        }
                        GeneratedField::Containers => {
                            if containers__.is_some() {
                                return Err(serde::de::Error::duplicate_field("containers"));
                            }
                            containers__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(PodPressure {
                    pod: pod__,
                    pod_cgroup: pod_cgroup__,
                    containers: containers__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PodPressure", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for PodRef {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.PodRef", len)?;
        if true {
            struct_ser.serialize_field("namespace", &self.namespace)?;
        }
        if true {
            struct_ser.serialize_field("name", &self.name)?;
        }
        if true {
            struct_ser.serialize_field("uid", &self.uid)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for PodRef {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "namespace",
            "name",
            "uid",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Namespace,
            Name,
            Uid,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "namespace" => Ok(GeneratedField::Namespace),
                            "name" => Ok(GeneratedField::Name),
                            "uid" => Ok(GeneratedField::Uid),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = PodRef;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.PodRef")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<PodRef, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut namespace__ = None;
                let mut name__ = None;
                let mut uid__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Namespace => {
                            if namespace__.is_some() {
                                return Err(serde::de::Error::duplicate_field("namespace"));
                            }
                            namespace__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Name => {
                            if name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("name"));
                            }
                            name__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Uid => {
                            if uid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("uid"));
                            }
                            uid__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(PodRef {
                    namespace: namespace__.unwrap_or_default(),
                    name: name__.unwrap_or_default(),
                    uid: uid__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.PodRef", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for Pressure {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.Pressure", len)?;
        if let Some(v) = self.cpu_usage_cores.as_ref() {
            struct_ser.serialize_field("cpuUsageCores", v)?;
        }
        if let Some(v) = self.cpu_periods_total.as_ref() {
            struct_ser.serialize_field("cpuPeriodsTotal", v)?;
        }
        if let Some(v) = self.cpu_throttled_periods_total.as_ref() {
            struct_ser.serialize_field("cpuThrottledPeriodsTotal", v)?;
        }
        if let Some(v) = self.cpu_throttled_seconds_total.as_ref() {
            struct_ser.serialize_field("cpuThrottledSecondsTotal", v)?;
        }
        if let Some(v) = self.cpu_throttled_ratio.as_ref() {
            struct_ser.serialize_field("cpuThrottledRatio", v)?;
        }
        if let Some(v) = self.cpu_throttled_seconds_per_second.as_ref() {
            struct_ser.serialize_field("cpuThrottledSecondsPerSecond", v)?;
        }
        if let Some(v) = self.probe_throttle_episodes_per_second.as_ref() {
            struct_ser.serialize_field("probeThrottleEpisodesPerSecond", v)?;
        }
        if let Some(v) = self.probe_throttled_seconds_per_second.as_ref() {
            struct_ser.serialize_field("probeThrottledSecondsPerSecond", v)?;
        }
        if let Some(v) = self.runq_latency_mean_seconds.as_ref() {
            struct_ser.serialize_field("runqLatencyMeanSeconds", v)?;
        }
        if let Some(v) = self.memory_usage_bytes.as_ref() {
            struct_ser.serialize_field("memoryUsageBytes", v)?;
        }
        if let Some(v) = self.memory_working_set_bytes.as_ref() {
            struct_ser.serialize_field("memoryWorkingSetBytes", v)?;
        }
        if let Some(v) = self.memory_reclaim_stall_seconds_per_second.as_ref() {
            struct_ser.serialize_field("memoryReclaimStallSecondsPerSecond", v)?;
        }
        if let Some(v) = self.oom_kills_total.as_ref() {
            struct_ser.serialize_field("oomKillsTotal", v)?;
        }
        if let Some(v) = self.psi_cpu.as_ref() {
            struct_ser.serialize_field("psiCpu", v)?;
        }
        if let Some(v) = self.psi_memory.as_ref() {
            struct_ser.serialize_field("psiMemory", v)?;
        }
        if let Some(v) = self.psi_io.as_ref() {
            struct_ser.serialize_field("psiIo", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for Pressure {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "cpu_usage_cores",
            "cpuUsageCores",
            "cpu_periods_total",
            "cpuPeriodsTotal",
            "cpu_throttled_periods_total",
            "cpuThrottledPeriodsTotal",
            "cpu_throttled_seconds_total",
            "cpuThrottledSecondsTotal",
            "cpu_throttled_ratio",
            "cpuThrottledRatio",
            "cpu_throttled_seconds_per_second",
            "cpuThrottledSecondsPerSecond",
            "probe_throttle_episodes_per_second",
            "probeThrottleEpisodesPerSecond",
            "probe_throttled_seconds_per_second",
            "probeThrottledSecondsPerSecond",
            "runq_latency_mean_seconds",
            "runqLatencyMeanSeconds",
            "memory_usage_bytes",
            "memoryUsageBytes",
            "memory_working_set_bytes",
            "memoryWorkingSetBytes",
            "memory_reclaim_stall_seconds_per_second",
            "memoryReclaimStallSecondsPerSecond",
            "oom_kills_total",
            "oomKillsTotal",
            "psi_cpu",
            "psiCpu",
            "psi_memory",
            "psiMemory",
            "psi_io",
            "psiIo",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            CpuUsageCores,
            CpuPeriodsTotal,
            CpuThrottledPeriodsTotal,
            CpuThrottledSecondsTotal,
            CpuThrottledRatio,
            CpuThrottledSecondsPerSecond,
            ProbeThrottleEpisodesPerSecond,
            ProbeThrottledSecondsPerSecond,
            RunqLatencyMeanSeconds,
            MemoryUsageBytes,
            MemoryWorkingSetBytes,
            MemoryReclaimStallSecondsPerSecond,
            OomKillsTotal,
            PsiCpu,
            PsiMemory,
            PsiIo,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "cpuUsageCores" | "cpu_usage_cores" => Ok(GeneratedField::CpuUsageCores),
                            "cpuPeriodsTotal" | "cpu_periods_total" => Ok(GeneratedField::CpuPeriodsTotal),
                            "cpuThrottledPeriodsTotal" | "cpu_throttled_periods_total" => Ok(GeneratedField::CpuThrottledPeriodsTotal),
                            "cpuThrottledSecondsTotal" | "cpu_throttled_seconds_total" => Ok(GeneratedField::CpuThrottledSecondsTotal),
                            "cpuThrottledRatio" | "cpu_throttled_ratio" => Ok(GeneratedField::CpuThrottledRatio),
                            "cpuThrottledSecondsPerSecond" | "cpu_throttled_seconds_per_second" => Ok(GeneratedField::CpuThrottledSecondsPerSecond),
                            "probeThrottleEpisodesPerSecond" | "probe_throttle_episodes_per_second" => Ok(GeneratedField::ProbeThrottleEpisodesPerSecond),
                            "probeThrottledSecondsPerSecond" | "probe_throttled_seconds_per_second" => Ok(GeneratedField::ProbeThrottledSecondsPerSecond),
                            "runqLatencyMeanSeconds" | "runq_latency_mean_seconds" => Ok(GeneratedField::RunqLatencyMeanSeconds),
                            "memoryUsageBytes" | "memory_usage_bytes" => Ok(GeneratedField::MemoryUsageBytes),
                            "memoryWorkingSetBytes" | "memory_working_set_bytes" => Ok(GeneratedField::MemoryWorkingSetBytes),
                            "memoryReclaimStallSecondsPerSecond" | "memory_reclaim_stall_seconds_per_second" => Ok(GeneratedField::MemoryReclaimStallSecondsPerSecond),
                            "oomKillsTotal" | "oom_kills_total" => Ok(GeneratedField::OomKillsTotal),
                            "psiCpu" | "psi_cpu" => Ok(GeneratedField::PsiCpu),
                            "psiMemory" | "psi_memory" => Ok(GeneratedField::PsiMemory),
                            "psiIo" | "psi_io" => Ok(GeneratedField::PsiIo),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = Pressure;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.Pressure")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<Pressure, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut cpu_usage_cores__ = None;
                let mut cpu_periods_total__ = None;
                let mut cpu_throttled_periods_total__ = None;
                let mut cpu_throttled_seconds_total__ = None;
                let mut cpu_throttled_ratio__ = None;
                let mut cpu_throttled_seconds_per_second__ = None;
                let mut probe_throttle_episodes_per_second__ = None;
                let mut probe_throttled_seconds_per_second__ = None;
                let mut runq_latency_mean_seconds__ = None;
                let mut memory_usage_bytes__ = None;
                let mut memory_working_set_bytes__ = None;
                let mut memory_reclaim_stall_seconds_per_second__ = None;
                let mut oom_kills_total__ = None;
                let mut psi_cpu__ = None;
                let mut psi_memory__ = None;
                let mut psi_io__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::CpuUsageCores => {
                            if cpu_usage_cores__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuUsageCores"));
                            }
                            cpu_usage_cores__ = map_.next_value()?;
                        }
                        GeneratedField::CpuPeriodsTotal => {
                            if cpu_periods_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuPeriodsTotal"));
                            }
                            cpu_periods_total__ = map_.next_value()?;
                        }
                        GeneratedField::CpuThrottledPeriodsTotal => {
                            if cpu_throttled_periods_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuThrottledPeriodsTotal"));
                            }
                            cpu_throttled_periods_total__ = map_.next_value()?;
                        }
                        GeneratedField::CpuThrottledSecondsTotal => {
                            if cpu_throttled_seconds_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuThrottledSecondsTotal"));
                            }
                            cpu_throttled_seconds_total__ = map_.next_value()?;
                        }
                        GeneratedField::CpuThrottledRatio => {
                            if cpu_throttled_ratio__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuThrottledRatio"));
                            }
                            cpu_throttled_ratio__ = map_.next_value()?;
                        }
                        GeneratedField::CpuThrottledSecondsPerSecond => {
                            if cpu_throttled_seconds_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuThrottledSecondsPerSecond"));
                            }
                            cpu_throttled_seconds_per_second__ = map_.next_value()?;
                        }
                        GeneratedField::ProbeThrottleEpisodesPerSecond => {
                            if probe_throttle_episodes_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("probeThrottleEpisodesPerSecond"));
                            }
                            probe_throttle_episodes_per_second__ = map_.next_value()?;
                        }
                        GeneratedField::ProbeThrottledSecondsPerSecond => {
                            if probe_throttled_seconds_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("probeThrottledSecondsPerSecond"));
                            }
                            probe_throttled_seconds_per_second__ = map_.next_value()?;
                        }
                        GeneratedField::RunqLatencyMeanSeconds => {
                            if runq_latency_mean_seconds__.is_some() {
                                return Err(serde::de::Error::duplicate_field("runqLatencyMeanSeconds"));
                            }
                            runq_latency_mean_seconds__ = map_.next_value()?;
                        }
                        GeneratedField::MemoryUsageBytes => {
                            if memory_usage_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryUsageBytes"));
                            }
                            memory_usage_bytes__ = map_.next_value()?;
                        }
                        GeneratedField::MemoryWorkingSetBytes => {
                            if memory_working_set_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryWorkingSetBytes"));
                            }
                            memory_working_set_bytes__ = map_.next_value()?;
                        }
                        GeneratedField::MemoryReclaimStallSecondsPerSecond => {
                            if memory_reclaim_stall_seconds_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryReclaimStallSecondsPerSecond"));
                            }
                            memory_reclaim_stall_seconds_per_second__ = map_.next_value()?;
                        }
                        GeneratedField::OomKillsTotal => {
                            if oom_kills_total__.is_some() {
                                return Err(serde::de::Error::duplicate_field("oomKillsTotal"));
                            }
                            oom_kills_total__ = map_.next_value()?;
                        }
                        GeneratedField::PsiCpu => {
                            if psi_cpu__.is_some() {
                                return Err(serde::de::Error::duplicate_field("psiCpu"));
                            }
                            psi_cpu__ = map_.next_value()?;
                        }
                        GeneratedField::PsiMemory => {
                            if psi_memory__.is_some() {
                                return Err(serde::de::Error::duplicate_field("psiMemory"));
                            }
                            psi_memory__ = map_.next_value()?;
                        }
                        GeneratedField::PsiIo => {
                            if psi_io__.is_some() {
                                return Err(serde::de::Error::duplicate_field("psiIo"));
                            }
                            psi_io__ = map_.next_value()?;
                        }
                    }
                }
                Ok(Pressure {
                    cpu_usage_cores: cpu_usage_cores__,
                    cpu_periods_total: cpu_periods_total__,
                    cpu_throttled_periods_total: cpu_throttled_periods_total__,
                    cpu_throttled_seconds_total: cpu_throttled_seconds_total__,
                    cpu_throttled_ratio: cpu_throttled_ratio__,
                    cpu_throttled_seconds_per_second: cpu_throttled_seconds_per_second__,
                    probe_throttle_episodes_per_second: probe_throttle_episodes_per_second__,
                    probe_throttled_seconds_per_second: probe_throttled_seconds_per_second__,
                    runq_latency_mean_seconds: runq_latency_mean_seconds__,
                    memory_usage_bytes: memory_usage_bytes__,
                    memory_working_set_bytes: memory_working_set_bytes__,
                    memory_reclaim_stall_seconds_per_second: memory_reclaim_stall_seconds_per_second__,
                    oom_kills_total: oom_kills_total__,
                    psi_cpu: psi_cpu__,
                    psi_memory: psi_memory__,
                    psi_io: psi_io__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.Pressure", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for Psi {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.Psi", len)?;
        if true {
            struct_ser.serialize_field("someAvg10", &self.some_avg10)?;
        }
        if true {
            struct_ser.serialize_field("someAvg60", &self.some_avg60)?;
        }
        if true {
            struct_ser.serialize_field("someAvg300", &self.some_avg300)?;
        }
        if true {
            struct_ser.serialize_field("someTotalSeconds", &self.some_total_seconds)?;
        }
        if true {
            struct_ser.serialize_field("fullAvg10", &self.full_avg10)?;
        }
        if true {
            struct_ser.serialize_field("fullAvg60", &self.full_avg60)?;
        }
        if true {
            struct_ser.serialize_field("fullAvg300", &self.full_avg300)?;
        }
        if true {
            struct_ser.serialize_field("fullTotalSeconds", &self.full_total_seconds)?;
        }
        if true {
            struct_ser.serialize_field("someSecondsPerSecond", &self.some_seconds_per_second)?;
        }
        if true {
            struct_ser.serialize_field("fullSecondsPerSecond", &self.full_seconds_per_second)?;
        }
        if let Some(v) = self.measured_at.as_ref() {
            struct_ser.serialize_field("measuredAt", v)?;
        }
        if true {
            struct_ser.serialize_field("stale", &self.stale)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for Psi {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "some_avg10",
            "someAvg10",
            "some_avg60",
            "someAvg60",
            "some_avg300",
            "someAvg300",
            "some_total_seconds",
            "someTotalSeconds",
            "full_avg10",
            "fullAvg10",
            "full_avg60",
            "fullAvg60",
            "full_avg300",
            "fullAvg300",
            "full_total_seconds",
            "fullTotalSeconds",
            "some_seconds_per_second",
            "someSecondsPerSecond",
            "full_seconds_per_second",
            "fullSecondsPerSecond",
            "measured_at",
            "measuredAt",
            "stale",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            SomeAvg10,
            SomeAvg60,
            SomeAvg300,
            SomeTotalSeconds,
            FullAvg10,
            FullAvg60,
            FullAvg300,
            FullTotalSeconds,
            SomeSecondsPerSecond,
            FullSecondsPerSecond,
            MeasuredAt,
            Stale,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "someAvg10" | "some_avg10" => Ok(GeneratedField::SomeAvg10),
                            "someAvg60" | "some_avg60" => Ok(GeneratedField::SomeAvg60),
                            "someAvg300" | "some_avg300" => Ok(GeneratedField::SomeAvg300),
                            "someTotalSeconds" | "some_total_seconds" => Ok(GeneratedField::SomeTotalSeconds),
                            "fullAvg10" | "full_avg10" => Ok(GeneratedField::FullAvg10),
                            "fullAvg60" | "full_avg60" => Ok(GeneratedField::FullAvg60),
                            "fullAvg300" | "full_avg300" => Ok(GeneratedField::FullAvg300),
                            "fullTotalSeconds" | "full_total_seconds" => Ok(GeneratedField::FullTotalSeconds),
                            "someSecondsPerSecond" | "some_seconds_per_second" => Ok(GeneratedField::SomeSecondsPerSecond),
                            "fullSecondsPerSecond" | "full_seconds_per_second" => Ok(GeneratedField::FullSecondsPerSecond),
                            "measuredAt" | "measured_at" => Ok(GeneratedField::MeasuredAt),
                            "stale" => Ok(GeneratedField::Stale),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = Psi;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.Psi")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<Psi, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut some_avg10__ = None;
                let mut some_avg60__ = None;
                let mut some_avg300__ = None;
                let mut some_total_seconds__ = None;
                let mut full_avg10__ = None;
                let mut full_avg60__ = None;
                let mut full_avg300__ = None;
                let mut full_total_seconds__ = None;
                let mut some_seconds_per_second__ = None;
                let mut full_seconds_per_second__ = None;
                let mut measured_at__ = None;
                let mut stale__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::SomeAvg10 => {
                            if some_avg10__.is_some() {
                                return Err(serde::de::Error::duplicate_field("someAvg10"));
                            }
                            some_avg10__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::SomeAvg60 => {
                            if some_avg60__.is_some() {
                                return Err(serde::de::Error::duplicate_field("someAvg60"));
                            }
                            some_avg60__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::SomeAvg300 => {
                            if some_avg300__.is_some() {
                                return Err(serde::de::Error::duplicate_field("someAvg300"));
                            }
                            some_avg300__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::SomeTotalSeconds => {
                            if some_total_seconds__.is_some() {
                                return Err(serde::de::Error::duplicate_field("someTotalSeconds"));
                            }
                            some_total_seconds__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::FullAvg10 => {
                            if full_avg10__.is_some() {
                                return Err(serde::de::Error::duplicate_field("fullAvg10"));
                            }
                            full_avg10__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::FullAvg60 => {
                            if full_avg60__.is_some() {
                                return Err(serde::de::Error::duplicate_field("fullAvg60"));
                            }
                            full_avg60__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::FullAvg300 => {
                            if full_avg300__.is_some() {
                                return Err(serde::de::Error::duplicate_field("fullAvg300"));
                            }
                            full_avg300__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::FullTotalSeconds => {
                            if full_total_seconds__.is_some() {
                                return Err(serde::de::Error::duplicate_field("fullTotalSeconds"));
                            }
                            full_total_seconds__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::SomeSecondsPerSecond => {
                            if some_seconds_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("someSecondsPerSecond"));
                            }
                            some_seconds_per_second__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::FullSecondsPerSecond => {
                            if full_seconds_per_second__.is_some() {
                                return Err(serde::de::Error::duplicate_field("fullSecondsPerSecond"));
                            }
                            full_seconds_per_second__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::MeasuredAt => {
                            if measured_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("measuredAt"));
                            }
                            measured_at__ = map_.next_value()?;
                        }
                        GeneratedField::Stale => {
                            if stale__.is_some() {
                                return Err(serde::de::Error::duplicate_field("stale"));
                            }
                            stale__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(Psi {
                    some_avg10: some_avg10__.unwrap_or_default(),
                    some_avg60: some_avg60__.unwrap_or_default(),
                    some_avg300: some_avg300__.unwrap_or_default(),
                    some_total_seconds: some_total_seconds__.unwrap_or_default(),
                    full_avg10: full_avg10__.unwrap_or_default(),
                    full_avg60: full_avg60__.unwrap_or_default(),
                    full_avg300: full_avg300__.unwrap_or_default(),
                    full_total_seconds: full_total_seconds__.unwrap_or_default(),
                    some_seconds_per_second: some_seconds_per_second__.unwrap_or_default(),
                    full_seconds_per_second: full_seconds_per_second__.unwrap_or_default(),
                    measured_at: measured_at__,
                    stale: stale__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.Psi", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ReleaseRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ReleaseRequest", len)?;
        if true {
            struct_ser.serialize_field("reservationId", &self.reservation_id)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ReleaseRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "reservation_id",
            "reservationId",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            ReservationId,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "reservationId" | "reservation_id" => Ok(GeneratedField::ReservationId),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ReleaseRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ReleaseRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ReleaseRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut reservation_id__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::ReservationId => {
                            if reservation_id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservationId"));
                            }
                            reservation_id__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ReleaseRequest {
                    reservation_id: reservation_id__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ReleaseRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ReleaseResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ReleaseResponse", len)?;
        if let Some(v) = self.reservation.as_ref() {
            struct_ser.serialize_field("reservation", v)?;
        }
        if let Some(v) = self.node.as_ref() {
            struct_ser.serialize_field("node", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ReleaseResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "reservation",
            "node",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Reservation,
            Node,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "reservation" => Ok(GeneratedField::Reservation),
                            "node" => Ok(GeneratedField::Node),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ReleaseResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ReleaseResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ReleaseResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut reservation__ = None;
                let mut node__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Reservation => {
                            if reservation__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservation"));
                            }
                            reservation__ = map_.next_value()?;
                        }
                        GeneratedField::Node => {
                            if node__.is_some() {
                                return Err(serde::de::Error::duplicate_field("node"));
                            }
                            node__ = map_.next_value()?;
                        }
                    }
                }
                Ok(ReleaseResponse {
                    reservation: reservation__,
                    node: node__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ReleaseResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for Reservation {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.Reservation", len)?;
        if true {
            struct_ser.serialize_field("id", &self.id)?;
        }
        if true {
            struct_ser.serialize_field("pod", &self.pod)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuMillis", ToString::to_string(&self.cpu_millis).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryBytes", ToString::to_string(&self.memory_bytes).as_str())?;
        }
        if let Some(v) = self.expires_at.as_ref() {
            struct_ser.serialize_field("expiresAt", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for Reservation {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "id",
            "pod",
            "cpu_millis",
            "cpuMillis",
            "memory_bytes",
            "memoryBytes",
            "expires_at",
            "expiresAt",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Id,
            Pod,
            CpuMillis,
            MemoryBytes,
            ExpiresAt,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "id" => Ok(GeneratedField::Id),
                            "pod" => Ok(GeneratedField::Pod),
                            "cpuMillis" | "cpu_millis" => Ok(GeneratedField::CpuMillis),
                            "memoryBytes" | "memory_bytes" => Ok(GeneratedField::MemoryBytes),
                            "expiresAt" | "expires_at" => Ok(GeneratedField::ExpiresAt),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = Reservation;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.Reservation")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<Reservation, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut id__ = None;
                let mut pod__ = None;
                let mut cpu_millis__ = None;
                let mut memory_bytes__ = None;
                let mut expires_at__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Id => {
                            if id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("id"));
                            }
                            id__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = Some(map_.next_value()?);
                        }
                        GeneratedField::CpuMillis => {
                            if cpu_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuMillis"));
                            }
                            cpu_millis__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::MemoryBytes => {
                            if memory_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryBytes"));
                            }
                            memory_bytes__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::ExpiresAt => {
                            if expires_at__.is_some() {
                                return Err(serde::de::Error::duplicate_field("expiresAt"));
                            }
                            expires_at__ = map_.next_value()?;
                        }
                    }
                }
                Ok(Reservation {
                    id: id__.unwrap_or_default(),
                    pod: pod__.unwrap_or_default(),
                    cpu_millis: cpu_millis__.unwrap_or_default(),
                    memory_bytes: memory_bytes__.unwrap_or_default(),
                    expires_at: expires_at__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.Reservation", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ReserveRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ReserveRequest", len)?;
        if true {
            struct_ser.serialize_field("reservationId", &self.reservation_id)?;
        }
        if true {
            struct_ser.serialize_field("pod", &self.pod)?;
        }
        if let Some(v) = self.amount.as_ref() {
            struct_ser.serialize_field("amount", v)?;
        }
        if true {
            struct_ser.serialize_field("ttlSeconds", &self.ttl_seconds)?;
        }
        if true {
            struct_ser.serialize_field("releasingPodUids", &self.releasing_pod_uids)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ReserveRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "reservation_id",
            "reservationId",
            "pod",
            "amount",
            "ttl_seconds",
            "ttlSeconds",
            "releasing_pod_uids",
            "releasingPodUids",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            ReservationId,
            Pod,
            Amount,
            TtlSeconds,
            ReleasingPodUids,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "reservationId" | "reservation_id" => Ok(GeneratedField::ReservationId),
                            "pod" => Ok(GeneratedField::Pod),
                            "amount" => Ok(GeneratedField::Amount),
                            "ttlSeconds" | "ttl_seconds" => Ok(GeneratedField::TtlSeconds),
                            "releasingPodUids" | "releasing_pod_uids" => Ok(GeneratedField::ReleasingPodUids),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ReserveRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ReserveRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ReserveRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut reservation_id__ = None;
                let mut pod__ = None;
                let mut amount__ = None;
                let mut ttl_seconds__ = None;
                let mut releasing_pod_uids__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::ReservationId => {
                            if reservation_id__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservationId"));
                            }
                            reservation_id__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Amount => {
                            if amount__.is_some() {
                                return Err(serde::de::Error::duplicate_field("amount"));
                            }
                            amount__ = map_.next_value()?;
                        }
                        GeneratedField::TtlSeconds => {
                            if ttl_seconds__.is_some() {
                                return Err(serde::de::Error::duplicate_field("ttlSeconds"));
                            }
                            ttl_seconds__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::ReleasingPodUids => {
                            if releasing_pod_uids__.is_some() {
                                return Err(serde::de::Error::duplicate_field("releasingPodUids"));
                            }
                            releasing_pod_uids__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ReserveRequest {
                    reservation_id: reservation_id__.unwrap_or_default(),
                    pod: pod__.unwrap_or_default(),
                    amount: amount__,
                    ttl_seconds: ttl_seconds__.unwrap_or_default(),
                    releasing_pod_uids: releasing_pod_uids__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ReserveRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ReserveResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ReserveResponse", len)?;
        if let Some(v) = self.reservation.as_ref() {
            struct_ser.serialize_field("reservation", v)?;
        }
        if let Some(v) = self.node.as_ref() {
            struct_ser.serialize_field("node", v)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ReserveResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "reservation",
            "node",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Reservation,
            Node,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "reservation" => Ok(GeneratedField::Reservation),
                            "node" => Ok(GeneratedField::Node),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ReserveResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ReserveResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ReserveResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut reservation__ = None;
                let mut node__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Reservation => {
                            if reservation__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reservation"));
                            }
                            reservation__ = map_.next_value()?;
                        }
                        GeneratedField::Node => {
                            if node__.is_some() {
                                return Err(serde::de::Error::duplicate_field("node"));
                            }
                            node__ = map_.next_value()?;
                        }
                    }
                }
                Ok(ReserveResponse {
                    reservation: reservation__,
                    node: node__,
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ReserveResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ResizePodRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ResizePodRequest", len)?;
        if true {
            struct_ser.serialize_field("pod", &self.pod)?;
        }
        if true {
            struct_ser.serialize_field("cpu", &self.cpu)?;
        }
        if true {
            struct_ser.serialize_field("memory", &self.memory)?;
        }
        if true {
            struct_ser.serialize_field("container", &self.container)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ResizePodRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "pod",
            "cpu",
            "memory",
            "container",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Pod,
            Cpu,
            Memory,
            Container,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "pod" => Ok(GeneratedField::Pod),
                            "cpu" => Ok(GeneratedField::Cpu),
                            "memory" => Ok(GeneratedField::Memory),
                            "container" => Ok(GeneratedField::Container),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ResizePodRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ResizePodRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ResizePodRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut pod__ = None;
                let mut cpu__ = None;
                let mut memory__ = None;
                let mut container__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Pod => {
                            if pod__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pod"));
                            }
                            pod__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Cpu => {
                            if cpu__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpu"));
                            }
                            cpu__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Memory => {
                            if memory__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memory"));
                            }
                            memory__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Container => {
                            if container__.is_some() {
                                return Err(serde::de::Error::duplicate_field("container"));
                            }
                            container__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ResizePodRequest {
                    pod: pod__.unwrap_or_default(),
                    cpu: cpu__.unwrap_or_default(),
                    memory: memory__.unwrap_or_default(),
                    container: container__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ResizePodRequest", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ResizePodResponse {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ResizePodResponse", len)?;
        if true {
            struct_ser.serialize_field("status", &self.status)?;
        }
        if true {
            struct_ser.serialize_field("message", &self.message)?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("generation", ToString::to_string(&self.generation).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ResizePodResponse {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "status",
            "message",
            "generation",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Status,
            Message,
            Generation,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "status" => Ok(GeneratedField::Status),
                            "message" => Ok(GeneratedField::Message),
                            "generation" => Ok(GeneratedField::Generation),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ResizePodResponse;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ResizePodResponse")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ResizePodResponse, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut status__ = None;
                let mut message__ = None;
                let mut generation__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Status => {
                            if status__.is_some() {
                                return Err(serde::de::Error::duplicate_field("status"));
                            }
                            status__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Message => {
                            if message__.is_some() {
                                return Err(serde::de::Error::duplicate_field("message"));
                            }
                            message__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Generation => {
                            if generation__.is_some() {
                                return Err(serde::de::Error::duplicate_field("generation"));
                            }
                            generation__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(ResizePodResponse {
                    status: status__.unwrap_or_default(),
                    message: message__.unwrap_or_default(),
                    generation: generation__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ResizePodResponse", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ResourceAmount {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ResourceAmount", len)?;
        if let Some(v) = self.cpu_millis.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("cpuMillis", ToString::to_string(&v).as_str())?;
        }
        if let Some(v) = self.memory_bytes.as_ref() {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("memoryBytes", ToString::to_string(&v).as_str())?;
        }
        if true {
            struct_ser.serialize_field("cpu", &self.cpu)?;
        }
        if true {
            struct_ser.serialize_field("memory", &self.memory)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ResourceAmount {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "cpu_millis",
            "cpuMillis",
            "memory_bytes",
            "memoryBytes",
            "cpu",
            "memory",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            CpuMillis,
            MemoryBytes,
            Cpu,
            Memory,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "cpuMillis" | "cpu_millis" => Ok(GeneratedField::CpuMillis),
                            "memoryBytes" | "memory_bytes" => Ok(GeneratedField::MemoryBytes),
                            "cpu" => Ok(GeneratedField::Cpu),
                            "memory" => Ok(GeneratedField::Memory),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ResourceAmount;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ResourceAmount")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ResourceAmount, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut cpu_millis__ = None;
                let mut memory_bytes__ = None;
                let mut cpu__ = None;
                let mut memory__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::CpuMillis => {
                            if cpu_millis__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuMillis"));
                            }
                            cpu_millis__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::MemoryBytes => {
                            if memory_bytes__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryBytes"));
                            }
                            memory_bytes__ = 
                                map_.next_value::<::std::option::Option<::pbjson::private::NumberDeserialize<_>>>()?.map(|x| x.0)
                            ;
                        }
                        GeneratedField::Cpu => {
                            if cpu__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpu"));
                            }
                            cpu__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Memory => {
                            if memory__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memory"));
                            }
                            memory__ = Some(map_.next_value()?);
                        }
                    }
                }
                Ok(ResourceAmount {
                    cpu_millis: cpu_millis__,
                    memory_bytes: memory_bytes__,
                    cpu: cpu__.unwrap_or_default(),
                    memory: memory__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ResourceAmount", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for ResourceFigures {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.ResourceFigures", len)?;
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("allocatable", ToString::to_string(&self.allocatable).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("allocated", ToString::to_string(&self.allocated).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("reserved", ToString::to_string(&self.reserved).as_str())?;
        }
        if true {
            #[allow(clippy::needless_borrow)]
            #[allow(clippy::needless_borrows_for_generic_args)]
            struct_ser.serialize_field("headroom", ToString::to_string(&self.headroom).as_str())?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for ResourceFigures {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "allocatable",
            "allocated",
            "reserved",
            "headroom",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Allocatable,
            Allocated,
            Reserved,
            Headroom,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "allocatable" => Ok(GeneratedField::Allocatable),
                            "allocated" => Ok(GeneratedField::Allocated),
                            "reserved" => Ok(GeneratedField::Reserved),
                            "headroom" => Ok(GeneratedField::Headroom),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = ResourceFigures;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.ResourceFigures")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<ResourceFigures, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut allocatable__ = None;
                let mut allocated__ = None;
                let mut reserved__ = None;
                let mut headroom__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Allocatable => {
                            if allocatable__.is_some() {
                                return Err(serde::de::Error::duplicate_field("allocatable"));
                            }
                            allocatable__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Allocated => {
                            if allocated__.is_some() {
                                return Err(serde::de::Error::duplicate_field("allocated"));
                            }
                            allocated__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Reserved => {
                            if reserved__.is_some() {
                                return Err(serde::de::Error::duplicate_field("reserved"));
                            }
                            reserved__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::Headroom => {
                            if headroom__.is_some() {
                                return Err(serde::de::Error::duplicate_field("headroom"));
                            }
                            headroom__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(ResourceFigures {
                    allocatable: allocatable__.unwrap_or_default(),
                    allocated: allocated__.unwrap_or_default(),
                    reserved: reserved__.unwrap_or_default(),
                    headroom: headroom__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.ResourceFigures", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for StandalonePod {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.StandalonePod", len)?;
        if true {
            struct_ser.serialize_field("namespace", &self.namespace)?;
        }
        if true {
            struct_ser.serialize_field("name", &self.name)?;
        }
        if true {
            struct_ser.serialize_field("uid", &self.uid)?;
        }
        if true {
            struct_ser.serialize_field("priority", &self.priority)?;
        }
        if true {
            struct_ser.serialize_field("cpuRequest", &self.cpu_request)?;
        }
        if true {
            struct_ser.serialize_field("allocatedCpu", &self.allocated_cpu)?;
        }
        if true {
            struct_ser.serialize_field("memoryRequest", &self.memory_request)?;
        }
        if true {
            struct_ser.serialize_field("allocatedMemory", &self.allocated_memory)?;
        }
        if true {
            struct_ser.serialize_field("phase", &self.phase)?;
        }
        if true {
            struct_ser.serialize_field("resize", &self.resize)?;
        }
        if let Some(v) = self.start_time.as_ref() {
            struct_ser.serialize_field("startTime", v)?;
        }
        if true {
            struct_ser.serialize_field("pids", &self.pids)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for StandalonePod {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "namespace",
            "name",
            "uid",
            "priority",
            "cpu_request",
            "cpuRequest",
            "allocated_cpu",
            "allocatedCpu",
            "memory_request",
            "memoryRequest",
            "allocated_memory",
            "allocatedMemory",
            "phase",
            "resize",
            "start_time",
            "startTime",
            "pids",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            Namespace,
            Name,
            Uid,
            Priority,
            CpuRequest,
            AllocatedCpu,
            MemoryRequest,
            AllocatedMemory,
            Phase,
            Resize,
            StartTime,
            Pids,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "namespace" => Ok(GeneratedField::Namespace),
                            "name" => Ok(GeneratedField::Name),
                            "uid" => Ok(GeneratedField::Uid),
                            "priority" => Ok(GeneratedField::Priority),
                            "cpuRequest" | "cpu_request" => Ok(GeneratedField::CpuRequest),
                            "allocatedCpu" | "allocated_cpu" => Ok(GeneratedField::AllocatedCpu),
                            "memoryRequest" | "memory_request" => Ok(GeneratedField::MemoryRequest),
                            "allocatedMemory" | "allocated_memory" => Ok(GeneratedField::AllocatedMemory),
                            "phase" => Ok(GeneratedField::Phase),
                            "resize" => Ok(GeneratedField::Resize),
                            "startTime" | "start_time" => Ok(GeneratedField::StartTime),
                            "pids" => Ok(GeneratedField::Pids),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = StandalonePod;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.StandalonePod")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<StandalonePod, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut namespace__ = None;
                let mut name__ = None;
                let mut uid__ = None;
                let mut priority__ = None;
                let mut cpu_request__ = None;
                let mut allocated_cpu__ = None;
                let mut memory_request__ = None;
                let mut allocated_memory__ = None;
                let mut phase__ = None;
                let mut resize__ = None;
                let mut start_time__ = None;
                let mut pids__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::Namespace => {
                            if namespace__.is_some() {
                                return Err(serde::de::Error::duplicate_field("namespace"));
                            }
                            namespace__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Name => {
                            if name__.is_some() {
                                return Err(serde::de::Error::duplicate_field("name"));
                            }
                            name__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Uid => {
                            if uid__.is_some() {
                                return Err(serde::de::Error::duplicate_field("uid"));
                            }
                            uid__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Priority => {
                            if priority__.is_some() {
                                return Err(serde::de::Error::duplicate_field("priority"));
                            }
                            priority__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                        GeneratedField::CpuRequest => {
                            if cpu_request__.is_some() {
                                return Err(serde::de::Error::duplicate_field("cpuRequest"));
                            }
                            cpu_request__ = Some(map_.next_value()?);
                        }
                        GeneratedField::AllocatedCpu => {
                            if allocated_cpu__.is_some() {
                                return Err(serde::de::Error::duplicate_field("allocatedCpu"));
                            }
                            allocated_cpu__ = Some(map_.next_value()?);
                        }
                        GeneratedField::MemoryRequest => {
                            if memory_request__.is_some() {
                                return Err(serde::de::Error::duplicate_field("memoryRequest"));
                            }
                            memory_request__ = Some(map_.next_value()?);
                        }
                        GeneratedField::AllocatedMemory => {
                            if allocated_memory__.is_some() {
                                return Err(serde::de::Error::duplicate_field("allocatedMemory"));
                            }
                            allocated_memory__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Phase => {
                            if phase__.is_some() {
                                return Err(serde::de::Error::duplicate_field("phase"));
                            }
                            phase__ = Some(map_.next_value()?);
                        }
                        GeneratedField::Resize => {
                            if resize__.is_some() {
                                return Err(serde::de::Error::duplicate_field("resize"));
                            }
                            resize__ = Some(map_.next_value()?);
                        }
                        GeneratedField::StartTime => {
                            if start_time__.is_some() {
                                return Err(serde::de::Error::duplicate_field("startTime"));
                            }
                            start_time__ = map_.next_value()?;
                        }
                        GeneratedField::Pids => {
                            if pids__.is_some() {
                                return Err(serde::de::Error::duplicate_field("pids"));
                            }
                            pids__ = 
                                Some(map_.next_value::<Vec<::pbjson::private::NumberDeserialize<_>>>()?
                                    .into_iter().map(|x| x.0).collect())
                            ;
                        }
                    }
                }
                Ok(StandalonePod {
                    namespace: namespace__.unwrap_or_default(),
                    name: name__.unwrap_or_default(),
                    uid: uid__.unwrap_or_default(),
                    priority: priority__.unwrap_or_default(),
                    cpu_request: cpu_request__.unwrap_or_default(),
                    allocated_cpu: allocated_cpu__.unwrap_or_default(),
                    memory_request: memory_request__.unwrap_or_default(),
                    allocated_memory: allocated_memory__.unwrap_or_default(),
                    phase: phase__.unwrap_or_default(),
                    resize: resize__.unwrap_or_default(),
                    start_time: start_time__,
                    pids: pids__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.StandalonePod", FIELDS, GeneratedVisitor)
    }
}
impl serde::Serialize for WatchHeadroomRequest {
    #[allow(deprecated)]
    fn serialize<S>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error>
    where
        S: serde::Serializer,
    {
        use serde::ser::SerializeStruct;
        let mut len = 0;
        if true {
            len += 1;
        }
        if true {
            len += 1;
        }
        let mut struct_ser = serializer.serialize_struct("headroom.v1.WatchHeadroomRequest", len)?;
        if true {
            struct_ser.serialize_field("includePods", &self.include_pods)?;
        }
        if true {
            struct_ser.serialize_field("minIntervalMs", &self.min_interval_ms)?;
        }
        struct_ser.end()
    }
}
impl<'de> serde::Deserialize<'de> for WatchHeadroomRequest {
    #[allow(deprecated)]
    fn deserialize<D>(deserializer: D) -> std::result::Result<Self, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        const FIELDS: &[&str] = &[
            "include_pods",
            "includePods",
            "min_interval_ms",
            "minIntervalMs",
        ];

        #[allow(clippy::enum_variant_names)]
        enum GeneratedField {
            IncludePods,
            MinIntervalMs,
        }
        impl<'de> serde::Deserialize<'de> for GeneratedField {
            fn deserialize<D>(deserializer: D) -> std::result::Result<GeneratedField, D::Error>
            where
                D: serde::Deserializer<'de>,
            {
                struct GeneratedVisitor;

                impl serde::de::Visitor<'_> for GeneratedVisitor {
                    type Value = GeneratedField;

                    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        write!(formatter, "expected one of: {:?}", &FIELDS)
                    }

                    #[allow(unused_variables)]
                    fn visit_str<E>(self, value: &str) -> std::result::Result<GeneratedField, E>
                    where
                        E: serde::de::Error,
                    {
                        match value {
                            "includePods" | "include_pods" => Ok(GeneratedField::IncludePods),
                            "minIntervalMs" | "min_interval_ms" => Ok(GeneratedField::MinIntervalMs),
                            _ => Err(serde::de::Error::unknown_field(value, FIELDS)),
                        }
                    }
                }
                deserializer.deserialize_identifier(GeneratedVisitor)
            }
        }
        struct GeneratedVisitor;
        impl<'de> serde::de::Visitor<'de> for GeneratedVisitor {
            type Value = WatchHeadroomRequest;

            fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                formatter.write_str("struct headroom.v1.WatchHeadroomRequest")
            }

            fn visit_map<V>(self, mut map_: V) -> std::result::Result<WatchHeadroomRequest, V::Error>
                where
                    V: serde::de::MapAccess<'de>,
            {
                let mut include_pods__ = None;
                let mut min_interval_ms__ = None;
                while let Some(k) = map_.next_key()? {
                    match k {
                        GeneratedField::IncludePods => {
                            if include_pods__.is_some() {
                                return Err(serde::de::Error::duplicate_field("includePods"));
                            }
                            include_pods__ = Some(map_.next_value()?);
                        }
                        GeneratedField::MinIntervalMs => {
                            if min_interval_ms__.is_some() {
                                return Err(serde::de::Error::duplicate_field("minIntervalMs"));
                            }
                            min_interval_ms__ = 
                                Some(map_.next_value::<::pbjson::private::NumberDeserialize<_>>()?.0)
                            ;
                        }
                    }
                }
                Ok(WatchHeadroomRequest {
                    include_pods: include_pods__.unwrap_or_default(),
                    min_interval_ms: min_interval_ms__.unwrap_or_default(),
                })
            }
        }
        deserializer.deserialize_struct("headroom.v1.WatchHeadroomRequest", FIELDS, GeneratedVisitor)
    }
}

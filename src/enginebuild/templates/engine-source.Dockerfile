# enginebuild stage: {{ engine }} source ({{ pin }})
FROM {{ parent }}
ADD {{ archive }} {{ dest }}/
